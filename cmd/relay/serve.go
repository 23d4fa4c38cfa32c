package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/core"
	"relay/internal/dataplane"
	"relay/internal/proxy"
	"relay/internal/ratelimit"
	"relay/internal/supervisor"
	"relay/internal/version"
)

// serve runs relay until SIGINT or SIGTERM: the whole of it, or with sp
// one of the serving processes a supervisor started, which serves on the
// socket it inherited, follows the supervisor's channel and writes its log
// lines to stdout for the supervisor to copy. Alone, relay runs its
// control in this process and follows it over the same channel.
func serve(f *flags, cfg *config.Config, src supervisor.ConfigSource, sp *supervisor.Process, stdout io.Writer) error {
	// Signals first: one that arrives while the backends are probed is
	// handled once relay serves, instead of killing it (SIGHUP's default).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	if sp != nil {
		// Standard output is a pipe to the supervisor. If the supervisor
		// is gone, log writes fail with EPIPE and the process drains
		// anyway, instead of dying of SIGPIPE.
		signal.Ignore(syscall.SIGPIPE)
	}
	if n := supervisor.ThreadsFor(cfg); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	logFile := cfg.LogFile
	if sp != nil {
		logFile = "" // the supervisor owns the file
	}
	lg, err := openLog(cfg, logFile, stdout, false)
	if err != nil {
		return err
	}
	defer lg.close()
	log, out := lg.log, lg.out
	budget := supervisor.RaiseFileLimit(log, cfg.MaxConnections)

	var c *controlled // alone: the control, in this process
	var d *doors
	if sp != nil {
		log = log.With("process", sp.Index)
		d = &doors{plain: sp.Listener, tls: sp.TLSListener}
	} else {
		if f.demo {
			stop, err := startDemoBackends(log)
			if err != nil {
				return err
			}
			defer stop()
		}
		if d, err = listen(cfg, fileOf(f, cfg)); err != nil {
			return err
		}
		if c, err = startControl(f, cfg, src, lg, d.listeners(), budget); err != nil {
			d.close()
			return err
		}
		defer c.stop()
		if sp, err = c.ctl.Local(d.plain); err != nil {
			d.close()
			return err
		}
	}

	access, err := openAccessLog(cfg, c != nil, out)
	if err != nil {
		return err
	}
	defer access.stop()
	// With several processes, rate limits' buckets are in the memory
	// they all map.
	var table *ratelimit.Table
	if sp.Shared != nil {
		if table, err = ratelimit.OpenShared(sp.Shared); err != nil {
			return err
		}
	}
	// With several processes each enforces its part of every request cap,
	// so relay as a whole never exceeds it.
	share := func(n int) int { return supervisor.Share(n, supervisor.ProcessCount(cfg), sp.Index) }
	plane, err := dataplane.New(cfg, dataplane.Options{
		Share: share, AccessLog: access.log, Logger: log, Descriptors: budget,
		// A breaker that opens or closes here does so in every process;
		// the control decides and logs it.
		Breakers: func(pool string) core.BreakerHook { return control.ReportBreaker(sp, pool) },
		// Every process of this relay carries the control's id in its
		// Via entry, so a request that comes back to any of them is known.
		Instance: sp.Config.Instance,
		// And the same key for sticky cookies, so a cookie one process
		// set is honoured by the others.
		StickyKey: sp.Config.StickyKey,
		RateTable: table,
	})
	if err != nil {
		return err
	}
	defer plane.Close()
	front := proxy.OptionsFrom(cfg)
	front.Logger = log
	p, err := proxy.New(front, plane.Core())
	if err != nil {
		return err
	}
	if err := d.open(cfg, sp.Config, p, log); err != nil {
		return err
	}

	// The control checks the backends for every process; the pool starts
	// from its membership and health snapshot. A transition takes effect
	// on the backend itself: pickers read its state at every pick.
	err = control.Follow(sp, plane, control.Updates{
		Config:  reconfigure(f, plane, d, lg, log),
		Stats:   p.Stats,
		Tickets: d.setTicketKeys,
		Reopen:  func() { access.reopenFile(log) },
		Log:     log,
		Ended: func(err error) {
			log.Error("channel from the supervisor ended; stopping so that it restarts this process", "err", err)
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		},
	})
	if err != nil {
		return err
	}
	stopCounters := sp.ReportCounters(time.Second, p.Stats)
	defer stopCounters()

	if c == nil {
		log.Info("process started", "pid", os.Getpid(), "healthy", plane.Available(), "workers", runtime.GOMAXPROCS(0))
	} else {
		log.Info("relay started", append(d.addrs(), "version", version.Get().Version, "algorithm", cfg.Algorithm,
			"backends", len(plane.Backends()), "pools", len(cfg.AllPools()), "routes", len(cfg.Routes), cfg.Discovery.LogAttr(), "healthy", plane.Available(),
			"workers", runtime.GOMAXPROCS(0), "admin", c.adminAddr())...)
		if cfg.CPUAffinity { // processes: 0 on a single core
			log.Warn("cpu_affinity ignored: it binds serving processes to cores, and there is one process")
		}
		logWarnings(log, cfg)
		c.disc.announce()
	}

	served := make(chan error, 2)
	d.serve(p, served)
	sp.Serving()
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGUSR1 && c != nil:
				lg.reopen()
				access.reopenFile(log)
				continue
			case sig == syscall.SIGHUP && c != nil:
				c.reload()
				continue
			case sig == syscall.SIGUSR1 || sig == syscall.SIGHUP:
				continue // the supervisor's business
			}
			log.Info("shutting down", "signal", sig.String(), "window", cfg.ShutdownTimeout.String(), "connections", p.Connections())
			if c != nil {
				c.disc.withdraw()
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			err := p.Shutdown(ctx)
			cancel()
			if err != nil {
				log.Warn("shutdown window elapsed; connections closed", "err", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}

// reconfigure returns what a serving process does with a configuration
// the control validated and sent: what a reload changes live is the
// pools and routes (with the backends' TLS settings), the certificates
// and session-ticket keys, and the log level (config.LiveKeys).
func reconfigure(f *flags, plane *dataplane.Plane, d *doors, lg *logs, log *slog.Logger) func(supervisor.ConfigSource) {
	return func(src supervisor.ConfigSource) {
		next, err := parseConfig(f, src)
		if err == nil {
			err = plane.Reconfigure(next)
		}
		if err == nil {
			err = d.reload(next, src)
		}
		if err != nil {
			log.Error("configuration from the supervisor refused; keeping the current one", "generation", src.Generation, "err", err)
			return
		}
		lg.setLevel(next)
		log.Debug("configuration applied", "generation", src.Generation)
	}
}
