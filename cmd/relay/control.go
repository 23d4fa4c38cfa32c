package main

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/acme"
	"relay/internal/admin"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/dataplane"
	"relay/internal/fds"
	"relay/internal/supervisor"
)

// controlled is relay's control and what runs beside it, however many
// processes serve: the active checks, the admin listener and reloads.
type controlled struct {
	ctl    *control.Control
	admin  *admin.Server // nil when admin_listen is off
	reload func() (uint64, error)
	stop   func()
	// disc watches etcd and keeps relay's own announcement there.
	disc *discoverer
	// reloader applies reloads; the ACME manager joins it (acme.go).
	reloader *reloader
}

// startControl makes relay's control for cfg, loaded from src, starts the
// active checks (one probe round first), the admin listener and
// discovery. bound are the client listeners' addresses when relay
// already listens; no backend may be one of them, nor the admin
// listener. Probes take their descriptors from budget.
func startControl(f *flags, cfg *config.Config, src supervisor.ConfigSource, lg *logs, bound config.Listeners, budget *fds.Budget) (*controlled, error) {
	log := lg.log
	up := dataplane.NewUpstreams(cfg, log)
	ctl, err := control.New(control.Options{
		Source: src, Pools: poolsOf(cfg), Members: dataplane.MembersOf(cfg), Prepare: up.Plan,
		StartChecks: checksStarter(budget, log), Log: log,
	})
	if err != nil {
		return nil, err
	}
	ctl.SetListeners(config.ListenersOf(cfg).Over(bound))
	r := &reloader{f: f, ctl: ctl, up: up, running: cfg, name: src.Name, logs: lg, log: log, builtIn: f.demo && f.config == ""}
	r.applied.Store(cfg)
	rotation, stopRotation := time.NewTicker(control.TicketKeyRotation), make(chan struct{})
	go func() {
		for {
			select {
			case <-rotation.C:
				ctl.RotateTickets()
			case <-stopRotation:
				return
			}
		}
	}()
	stopChecks := func() { rotation.Stop(); close(stopRotation); ctl.StopChecks() }
	c := &controlled{ctl: ctl, reload: r.reload, stop: stopChecks, reloader: r}
	if cfg.AdminListen != "" {
		c.admin, err = admin.Start(cfg.AdminListen, admin.Options{
			Control: ctl, Token: cfg.AdminToken, AllowedHosts: cfg.AdminAllowedHosts, Reload: r.reload, Log: log,
			IgnoringWeights: configOptions().IgnoringWeights,
		})
		if err != nil {
			stopChecks()
			return nil, listenFailed("admin listener", "admin_listen", cfg.AdminListen, adminHint, fileOf(f, cfg), err)
		}
		c.stop = func() { c.admin.Shutdown(); stopChecks() }
		ctl.SetListeners(config.Listeners{AdminListen: c.admin.Addr()})
	}
	// Discovery starts once the control knows every address of relay's,
	// so the first set etcd gives is judged against them all.
	disc := startDiscovery(cfg, ctl, log)
	r.disc, c.disc = disc, disc
	stopRest := c.stop
	c.stop = func() { disc.stop(); stopRest() }
	return c, nil
}

// adminAddr is the admin listener's address for the start line, or "off".
func (c *controlled) adminAddr() string {
	if c.admin == nil {
		return "off"
	}
	return c.admin.Addr()
}

// reloader loads the configuration file again (SIGHUP, POST /reload).
type reloader struct {
	mu      sync.Mutex // one reload at a time
	f       *flags
	ctl     *control.Control
	up      *dataplane.Upstreams
	disc    *discoverer
	running *config.Config // what relay started with: restart-only settings
	// applied is the configuration last applied, at start or by a
	// reload, for what the admin API shows of it (the algorithm).
	applied atomic.Pointer[config.Config]
	name    string
	builtIn bool
	logs    *logs
	log     *slog.Logger
	// acme is the instance's ACME manager, nil until it starts, or
	// without an acme section.
	acme *acme.Manager
}

// reload reads and validates the file; an invalid one is refused with
// every problem logged, and relay keeps what it runs. A valid one becomes
// the configuration every process runs: backends that stay keep their
// state, added ones are checked at once, removed ones finish what they
// have in flight. Settings that need a restart are named in the log.
func (r *reloader) reload() (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.builtIn || r.name == "" {
		err := errors.New("relay runs without a configuration file (flags or the demo), so there is nothing to reload")
		r.log.Warn("reload refused", "err", err.Error())
		r.ctl.ReloadRefused()
		return 0, err
	}
	src := supervisor.ConfigSource{Generation: r.ctl.Generation() + 1, Name: r.name}
	data, err := os.ReadFile(r.name)
	src.Data = data
	var cfg *config.Config
	if err == nil {
		cfg, err = parseConfig(r.f, src)
	}
	if err == nil {
		err = supervisor.CheckPlatform(cfg)
	}
	if err == nil {
		err = cfg.CheckEnvironment()
	}
	if err != nil {
		var problems []string
		var cerr *config.Errors
		if errors.As(err, &cerr) {
			for _, p := range cerr.Problems {
				problems = append(problems, p.String())
			}
		} else {
			problems = []string{err.Error()}
		}
		r.log.Error("reload refused: the configuration is invalid; relay keeps serving the one it runs",
			"file", r.name, "problems", problems)
		r.ctl.ReloadRefused()
		return 0, err
	}
	if keys := config.RestartOnly(r.running, cfg); len(keys) > 0 {
		r.log.Warn("reload: these settings changed but take effect only when relay restarts; it keeps the values it started with",
			"settings", keys)
	}
	// Backends' TLS files are read under the new configuration, which
	// the upstream settings adopt only if every backend builds.
	adopt := func() { r.up.Reload(cfg) }
	changes, err := r.ctl.Reloaded(src, poolsOf(cfg), dataplane.MembersOf(cfg), r.up.PlanUnder(cfg), adopt)
	if err != nil {
		r.log.Error("reload refused", "err", err.Error())
		r.ctl.ReloadRefused()
		return 0, err
	}
	before := r.applied.Swap(cfg)
	r.logs.setLevel(cfg)
	r.disc.reload(cfg)
	r.reloadACME(cfg)
	// One line per reload, from the control, however many processes serve.
	r.log.Info("configuration reloaded", append([]any{"file", r.name, "generation", src.Generation, "backends", cfg.BackendCount(), "pools", len(cfg.AllPools()), "routes", len(cfg.Routes)},
		reloadAttrs(changes, before, cfg)...)...)
	logWarnings(r.log, cfg)
	return src.Generation, nil
}

// poolsOf is the control's rules of every pool cfg has: the default pool
// (the top level) when it has one, then the named pools in file order.
func poolsOf(cfg *config.Config) []control.PoolRules {
	var rs []control.PoolRules
	for _, np := range cfg.AllPools() {
		rs = append(rs, control.PoolRules{
			Name: np.Name, Algorithm: np.Algorithm,
			MaxEjectedPercent: np.MaxEjectedPercent, Check: checkOf(np.HealthCheck),
		})
	}
	return rs
}
