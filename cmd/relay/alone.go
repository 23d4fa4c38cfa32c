package main

import (
	"log/slog"
	"runtime"

	"relay/internal/config"
	"relay/internal/dataplane"
	"relay/internal/fds"
	"relay/internal/supervisor"
	"relay/internal/version"
)

// startAlone starts what relay serving alone runs beside its data plane:
// the demo's backends (-demo), the listeners cfg asks for (d), and the
// control (c), which this process follows over a socket pair (sp) as a
// serving process follows its supervisor. c.stop stops the control, then
// the demo's backends.
func startAlone(f *flags, cfg *config.Config, src supervisor.ConfigSource, lg *logs, budget *fds.Budget) (c *controlled, d *doors, sp *supervisor.Process, err error) {
	stopDemo := func() {}
	if f.demo {
		if stopDemo, err = startDemoBackends(lg.log); err != nil {
			return nil, nil, nil, err
		}
	}
	defer func() {
		if err != nil {
			stopDemo()
		}
	}()
	if d, err = listen(cfg, fileOf(f, cfg)); err != nil {
		return nil, nil, nil, err
	}
	if c, err = startControl(f, cfg, src, lg, d.listeners(), budget); err != nil {
		d.close()
		return nil, nil, nil, err
	}
	if sp, err = c.ctl.Local(d.plain); err != nil {
		d.close()
		c.stop()
		return nil, nil, nil, err
	}
	if err = c.startACME(cfg, d.listeners().TLSListen, lg.log); err != nil {
		d.close()
		c.stop()
		return nil, nil, nil, err
	}
	stopControl := c.stop
	c.stop = func() { stopControl(); stopDemo() }
	return c, d, sp, nil
}

// started logs relay's start line and what in its configuration is
// likely not what was meant, and announces relay in etcd when the
// configuration asks it to: relay alone serves from now on.
func (c *controlled) started(log *slog.Logger, cfg *config.Config, d *doors, plane *dataplane.Plane) {
	log.Info("relay started", append(d.addrs(), "version", version.Get().Version, "algorithm", cfg.Algorithm,
		"backends", len(plane.Backends()), "pools", len(cfg.AllPools()), "routes", len(cfg.Routes), cfg.Discovery.LogAttr(), "healthy", plane.Available(),
		"workers", runtime.GOMAXPROCS(0), "admin", c.adminAddr())...)
	if cfg.CPUAffinity { // processes: 0 on a single core
		log.Warn("cpu_affinity ignored: it binds serving processes to cores, and there is one process")
	}
	logWarnings(log, cfg)
	c.disc.announce()
}
