package control

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// Errors of operator actions, for the admin API to map to statuses; the
// errors returned wrap them with what was wrong.
var (
	ErrNoBackend = errors.New("no such backend")
	ErrInvalid   = errors.New("invalid request")
	ErrConflict  = errors.New("conflict")
)

// Find returns the name of the backend that name or host:port (http
// assumed) designates, or ErrNoBackend.
func (l *Control) Find(name string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.backendLocked(name); b != nil {
		return b.Name, nil
	}
	if !strings.Contains(name, "://") {
		if b := l.backendLocked("http://" + name); b != nil {
			return b.Name, nil
		}
	}
	return "", fmt.Errorf("%w %q; GET /api/backends lists them", ErrNoBackend, name)
}

// Drain stops new requests to a backend; those in flight finish. It shows
// as drained once none is left in any process.
func (l *Control) Drain(name string) error {
	return l.operate(name, "backend draining", func(b *backend.Backend) bool { return b.SetDraining(true) })
}

// Disable takes a backend out of rotation (HAProxy's maintenance).
func (l *Control) Disable(name string) error {
	return l.operate(name, "backend disabled", func(b *backend.Backend) bool { return b.SetDisabled(true) })
}

// Enable ends a drain or a disable.
func (l *Control) Enable(name string) error {
	return l.operate(name, "backend enabled", func(b *backend.Backend) bool {
		d, e := b.SetDraining(false), b.SetDisabled(false)
		return d || e
	})
}

// operate applies an operator action to the backend named name here and in
// every process, and logs it when it changed anything.
func (l *Control) operate(name, msg string, act func(*backend.Backend) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.backendLocked(name)
	if b == nil {
		return fmt.Errorf("%w %q", ErrNoBackend, name)
	}
	if act(b) {
		l.log.Info(msg, "backend", b.Name, "by", "operator")
	}
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindOperator, Operator: operatorOf(b)})
	return nil
}

// SetWeight changes a backend's weight in every process.
func (l *Control) SetWeight(name string, weight int) error {
	if weight < 1 || weight > config.MaxWeight {
		return fmt.Errorf("%w: weight %d is outside 1..%d; to take a backend out, drain it", ErrInvalid, weight, config.MaxWeight)
	}
	return l.change(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		for i := range ms {
			if ms[i].URL == name {
				l.log.Info("backend weight changed", "backend", name, "weight", weight, "was", ms[i].Weight, "by", "operator")
				ms[i].Weight = weight
				return ms, nil
			}
		}
		return nil, fmt.Errorf("%w %q", ErrNoBackend, name)
	})
}

// Add adds a backend to the pool in every process; it is checked at once
// and, with slow start, ramps up. It returns the backend's name. A
// backend that is relay itself (Self) is ErrInvalid.
func (l *Control) Add(rawURL string, weight int) (string, error) {
	u, err := config.BackendURL(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: url: %v", ErrInvalid, err)
	}
	if msg, self := l.Self(u); self {
		return "", fmt.Errorf("%w: url: %s", ErrInvalid, msg)
	}
	if weight == 0 {
		weight = config.DefaultWeight
	}
	if weight < 1 || weight > config.MaxWeight {
		return "", fmt.Errorf("%w: weight %d is outside 1..%d", ErrInvalid, weight, config.MaxWeight)
	}
	name := u.String()
	err = l.change(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		for _, m := range ms {
			if m.URL == name {
				return nil, fmt.Errorf("%w: backend %q is in the pool already", ErrConflict, name)
			}
		}
		l.log.Info("backend added", "backend", name, "weight", weight, "by", "operator")
		return append(ms, supervisor.Member{URL: name, Weight: weight, From: supervisor.FromAPI}), nil
	})
	return name, err
}

// Remove takes a backend out of the pool in every process; requests in
// flight to it finish.
func (l *Control) Remove(name string) error {
	var note func()
	return l.commit(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		for i, m := range ms {
			if m.URL == name {
				if m.From == supervisor.FromEtcd {
					return nil, fmt.Errorf("%w: backend %q comes from etcd key %q; delete the key to remove it (drain it to stop its traffic meanwhile)", ErrConflict, name, m.Key)
				}
				rest := append(ms[:i:i], ms[i+1:]...)
				// A backend etcd announces too was left out for this
				// one; it serves again.
				next, joined := l.withDiscoveredLocked(staticOf(rest), rest)
				note = func() {
					l.log.Info("backend removed", "backend", name, "by", "operator")
					joined()
				}
				return next, nil
			}
		}
		return nil, fmt.Errorf("%w %q", ErrNoBackend, name)
	}, nil, func() { note() })
}

// Reloaded makes src the configuration of every process (a process
// started later runs it too), members the pool's membership and
// maxEjected the bound on breakers; a member that is relay itself
// (Self) refuses the reload. Backends that stay keep their state:
// health, breaker, operator state, counters. prepare checks and readies
// the backends under the new configuration, in place of Prepare; adopt,
// when every check passed, runs before the steps prepare returned, so the
// caller can take the configuration with them. A refused reload changes
// nothing. It returns what the reload did to the membership, discovered
// and operator-added members included.
func (l *Control) Reloaded(src supervisor.ConfigSource, members []supervisor.Member, maxEjected int, prepare func(*backend.Backend) (func(), error), adopt func()) (Changes, error) {
	// The file was checked against the addresses it names; relay still
	// listens where it started, whatever the file says now.
	if err := l.refuseSelf(members); err != nil {
		return Changes{}, err
	}
	var joined func()
	var changes Changes
	err := l.commit(func(ms []supervisor.Member) (next []supervisor.Member, err error) {
		next, joined = l.withDiscoveredLocked(members, ms)
		changes = changesOf(ms, next)
		return next, nil
	}, prepare, func() {
		joined()
		if adopt != nil {
			adopt()
		}
		src.TicketKeys = nextTicketKeys(l.config.TicketKeys)
		src.Instance = l.config.Instance // a reload is the same relay
		l.config, l.maxEjected = src, maxEjected
		l.reloads[0]++
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindConfig, Config: &src})
	})
	if err != nil {
		return Changes{}, err
	}
	return changes, nil
}

// ReloadRefused counts a reload whose configuration was invalid.
func (l *Control) ReloadRefused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reloads[1]++
}

// Reopen tells every process that the shared log file was rotated.
func (l *Control) Reopen() { l.broadcast(supervisor.Message{Kind: supervisor.KindReopen}) }

// Generation is the configuration generation relay runs.
func (l *Control) Generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.config.Generation
}

// change applies edit to the membership under the control's lock, builds
// the backends of the result (keeping those that stay), sends it to every
// process and hands the checks their new targets.
func (l *Control) change(edit func([]supervisor.Member) ([]supervisor.Member, error)) error {
	return l.commit(edit, nil, nil)
}

// commit is change, with prepare (nil: Prepare) checking and readying the
// backends, and then run under the control's lock once every check has
// passed, before the steps and before the membership goes out: a change
// that fails leaves nothing half done.
func (l *Control) commit(edit func([]supervisor.Member) ([]supervisor.Member, error), prepare func(*backend.Backend) (func(), error), then func()) error {
	// One change at a time from start to end, so the checks get the
	// targets of the last change, not of whichever finished last.
	l.changing.Lock()
	defer l.changing.Unlock()
	l.mu.Lock()
	ms, err := edit(append([]supervisor.Member(nil), l.members...))
	if err != nil {
		l.mu.Unlock()
		return err
	}
	// Every check first; then the steps, which cannot fail.
	if prepare == nil {
		prepare = l.prepare
	}
	bs := make([]*backend.Backend, len(ms))
	steps := make([]func(), len(ms))
	for i, m := range ms {
		b, step, err := l.memberLocked(m, prepare)
		if err != nil {
			l.mu.Unlock()
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		bs[i], steps[i] = b, step
	}
	if then != nil {
		then()
	}
	for _, step := range steps {
		step()
	}
	l.members, l.bs = ms, bs
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindMembership, Membership: append([]supervisor.Member(nil), ms...)})
	targets := l.targets
	l.mu.Unlock()
	if targets != nil {
		// Outside the lock: the checks report what they find through it.
		targets(bs)
	}
	return nil
}

// memberLocked returns the backend of m and the step that gives it m's
// settings: the current backend when it stays, its weight, request cap
// and TLS settings changed in place by the step so it keeps its health,
// breaker, operator state and counters; else a new one. Nothing changes
// before the step runs.
func (l *Control) memberLocked(m supervisor.Member, prepare func(*backend.Backend) (func(), error)) (*backend.Backend, func(), error) {
	if b := l.backendLocked(m.URL); b != nil {
		ready, err := prepare(b)
		if err != nil {
			return nil, nil, err
		}
		return b, func() {
			b.SetEffectiveWeight(m.Weight)
			b.SetMaxRequests(m.MaxRequests)
			ready()
		}, nil
	}
	u, err := url.Parse(m.URL)
	if err != nil {
		return nil, nil, err
	}
	b, err := backend.New(u, m.Weight)
	if err != nil {
		return nil, nil, err
	}
	b.SetMaxRequests(m.MaxRequests)
	ready, err := prepare(b)
	if err != nil {
		return nil, nil, err
	}
	return b, ready, nil
}

func (l *Control) prepare(b *backend.Backend) (func(), error) {
	if l.Prepare == nil {
		return func() {}, nil
	}
	return l.Prepare(b)
}

// Status is relay as a whole at one moment, for the admin API, the
// dashboard and /metrics.
type Status struct {
	Generation uint64
	// Processes is how many serving processes are attached.
	Processes int
	Members   []MemberStatus
	// Stats are the counters of every process, summed (Control.Stats).
	Stats *stats.Process
	// Reloads counts reloads applied and refused.
	Reloads [2]uint64
	Time    time.Time
}

// MemberStatus is one member of the pool: its configuration, its state as
// the control holds it, what its checks and breaker did.
type MemberStatus struct {
	supervisor.Member
	State     backend.State
	HalfOpen  bool // its breaker's open time is over and a probe decides
	Checks    stats.CheckCounts
	Ejections uint64
}

// Status returns relay's state and counters now, collecting the
// counters from every process (bounded by ctx).
func (l *Control) Status(ctx context.Context) *Status {
	st := l.Stats(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &Status{Generation: l.config.Generation, Processes: len(l.byProc), Stats: st, Reloads: l.reloads, Time: time.Now()}
	for i, m := range l.members {
		b := l.bs[i]
		s.Members = append(s.Members, MemberStatus{
			Member: m, State: b.State(), HalfOpen: b.Ejected() && b.EjectedUntil().IsZero(),
			Checks: b.Checks.Read(), Ejections: l.ejections[b.Name],
		})
	}
	return s
}

// InRotation counts the backends that may be picked now.
func (l *Control) InRotation() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.bs {
		if b.Available() {
			n++
		}
	}
	return n
}
