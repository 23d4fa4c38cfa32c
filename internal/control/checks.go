package control

import (
	"relay/internal/backend"
	"relay/internal/health"
	"relay/internal/supervisor"
)

// Active checks run once per address and check setting, whichever pools
// hold the address: pools whose health_check is the same share one probe
// of it and its verdict, which reaches each of their memberships; a pool
// that checks the address differently (another path) has a probe of its
// own, and a verdict of its own.

// Checker is a running set of active checks (a *health.Checker).
type Checker interface {
	// Set makes targets the backends checked, by name.
	Set(targets []*backend.Backend)
	// Stop ends the checks.
	Stop()
}

// StartChecks starts active checks of targets under cfg, reporting each
// transition of a target to onChange; it returns once every target has
// been probed once, so relay starts from what the checks found.
type StartChecks func(cfg health.Config, targets []*backend.Backend, onChange func(*backend.Backend, bool)) (Checker, error)

// checkGroup is the checks of one setting: one probe per address, each a
// membership of the address's Host of the group's own, which no pool
// holds. Its fields are guarded by the control's mutex.
type checkGroup struct {
	cfg     health.Config
	checker Checker
	probes  map[string]*backend.Backend // by address
	order   []*backend.Backend          // probes in the order members hold them
}

// syncChecks makes the checks follow the membership: a group per check
// setting some pool with members uses, a probe per address there, each
// member taking its probe's verdict. A new probe starts from the verdict
// its members had, so a member that was down stays out until checks
// pass. It runs after every membership change, with l.changing held.
func (l *Control) syncChecks() {
	l.mu.Lock()
	if l.startChecks == nil {
		l.mu.Unlock()
		return // no checks: nothing to follow
	}
	// Groups that stay are the same values, which their checks report
	// through; their probes are rebuilt here and swapped in below.
	next := map[health.Config]*checkGroup{}
	probes := map[*checkGroup]map[string]*backend.Backend{}
	orders := map[*checkGroup][]*backend.Backend{}
	fresh := map[*backend.Backend]bool{}
	for i, m := range l.members {
		cfg := l.rulesLocked(m.Pool).Check
		g := next[cfg]
		if g == nil {
			if g = l.checks[cfg]; g == nil {
				g = &checkGroup{cfg: cfg, probes: map[string]*backend.Backend{}}
			}
			next[cfg], probes[g] = g, map[string]*backend.Backend{}
		}
		b := l.bs[i]
		probe := probes[g][b.Name]
		if probe == nil {
			if old := g.probes[b.Name]; old != nil && old.Host == b.Host {
				probe = old
			} else {
				probe, _ = b.Host.Member(b.Pool, 1) // weight 1 cannot fail
				fresh[probe] = true
			}
			probes[g][b.Name] = probe
			orders[g] = append(orders[g], probe)
		}
		if fresh[probe] && !b.Healthy() {
			probe.SetHealthy(false) // down anywhere it was, down until checks pass
		}
	}
	for g, ps := range probes {
		g.probes, g.order = ps, orders[g]
	}
	var gone []*checkGroup
	for cfg, g := range l.checks {
		if next[cfg] == nil && g.checker != nil {
			gone = append(gone, g)
		}
	}
	var turned []supervisor.BackendHealth
	for i, m := range l.members {
		g := next[l.rulesLocked(m.Pool).Check]
		if up := g.probes[m.URL].Healthy(); l.bs[i].SetHealthy(up) {
			turned = append(turned, supervisor.BackendHealth{Pool: m.Pool, Name: m.URL, Up: up})
		}
	}
	l.checks = next
	if len(turned) > 0 {
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{Backends: turned}})
	}
	start := l.startChecks
	l.mu.Unlock()

	// Outside the lock: the checks report what they find through it.
	for _, g := range gone {
		g.checker.Stop()
	}
	if start == nil {
		return
	}
	for _, g := range next {
		if g.checker != nil {
			g.checker.Set(g.order)
			continue
		}
		c, err := start(g.cfg, g.order, func(b *backend.Backend, up bool) { l.checked(g, b, up) })
		if err != nil {
			l.log.Error("active checks could not start; their backends keep the state they have", "err", err.Error())
			continue
		}
		l.mu.Lock()
		g.checker = c
		l.mu.Unlock()
	}
}

// checked takes a transition of probe, one of g's, to every member its
// verdict is, and to every process.
func (l *Control) checked(g *checkGroup, probe *backend.Backend, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checks[g.cfg] != g || g.probes[probe.Name] != probe {
		return // a change took the probe or its group away meanwhile
	}
	var turned []supervisor.BackendHealth
	for i, m := range l.members {
		if m.URL == probe.Name && l.rulesLocked(m.Pool).Check == g.cfg && l.bs[i].SetHealthy(up) {
			turned = append(turned, supervisor.BackendHealth{Pool: m.Pool, Name: m.URL, Up: up})
		}
	}
	if len(turned) > 0 {
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{Backends: turned}})
	}
}

// healthChanged sends member b's transition to every process, as a check
// would.
func (l *Control) healthChanged(b *backend.Backend, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, mb := range l.bs {
		if mb == b {
			l.broadcastLocked(supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{
				Backends: []supervisor.BackendHealth{{Pool: l.members[i].Pool, Name: b.Name, Up: up}}}})
		}
	}
}

// StopChecks ends the active checks; changes after it start none.
func (l *Control) StopChecks() {
	l.changing.Lock()
	defer l.changing.Unlock()
	l.mu.Lock()
	l.startChecks = nil
	var run []Checker
	for _, g := range l.checks {
		if g.checker != nil {
			run = append(run, g.checker)
		}
	}
	l.checks = map[health.Config]*checkGroup{}
	l.mu.Unlock()
	for _, c := range run {
		c.Stop()
	}
}
