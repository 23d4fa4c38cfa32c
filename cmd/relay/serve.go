package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"relay/internal/acme"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/core"
	"relay/internal/dataplane"
	"relay/internal/supervisor"
)

// serve runs relay until SIGINT or SIGTERM: the whole of it, or with sp
// one of the serving processes a supervisor started, which serves on the
// socket it inherited, follows the supervisor's channel and writes its log
// lines to stdout for the supervisor to copy. Alone, relay runs its
// control in this process and follows it over the same channel.
func serve(f *flags, cfg *config.Config, src supervisor.ConfigSource, sp *supervisor.Process, stdout io.Writer) error {
	sigs := catchSignals(sp != nil)
	defer signal.Stop(sigs)
	if n := supervisor.ThreadsFor(cfg); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	lg, err := openLog(cfg, ownLogFile(cfg, sp), stdout, false)
	if err != nil {
		return err
	}
	defer lg.close()
	log := lg.log
	budget := supervisor.RaiseFileLimit(log, cfg.MaxConnections)

	var c *controlled // alone: the control, in this process
	var d *doors
	if sp != nil {
		log = log.With("process", sp.Index)
		d = &doors{plain: sp.Listener, tls: sp.TLSListener}
	} else {
		if c, d, sp, err = startAlone(f, cfg, src, lg, budget); err != nil {
			return err
		}
		defer c.stop()
	}
	access, err := openAccessLog(cfg, c != nil, lg.out)
	if err != nil {
		return err
	}
	defer access.stop()
	certs := servingACME(cfg, sp, log)
	opts := dataplane.Options{
		AccessLog: access.log, Logger: log, Descriptors: budget,
		// A breaker that opens or closes here does so in every process;
		// the control decides and logs it.
		Breakers: func(pool string) core.BreakerHook { return control.ReportBreaker(sp, pool) },
	}
	if certs != nil {
		opts.HTTP01 = certs // the cleartext door answers the CA's HTTP-01 requests
	}
	plane, err := dataplane.NewForProcess(cfg, sp, opts)
	if err != nil {
		return err
	}
	defer plane.Close()
	p, err := d.open(cfg, sp.Config, plane.Core(), certs, log)
	if err != nil {
		return err
	}
	demand := servingOnDemand(cfg, sp, certs, log)
	d.setOnDemand(demand)
	// The control checks the backends for every process and decides their
	// membership; Follow applies its membership and health snapshot to the
	// data plane before it returns, and what follows as it comes.
	updates := control.Updates{
		Config: reconfigure(f, plane, d, certs, lg, log), Stats: p.Stats, Tickets: d.setTicketKeys,
		Reopen: func() { access.reopenFile(log) }, Ended: restart(log), Log: log,
	}
	acmeUpdates(&updates, certs, log)
	onDemandUpdates(&updates, demand)
	err = control.Follow(sp, plane, updates)
	if err != nil {
		return err
	}
	defer sp.ReportCounters(time.Second, p.Stats)()
	var on onSignals
	if c == nil {
		log.Info("process started", "pid", os.Getpid(), "healthy", plane.Available(), "workers", runtime.GOMAXPROCS(0))
	} else {
		c.started(log, cfg, d, plane)
		on = onSignals{reopen: func() { lg.reopen(); access.reopenFile(log) }, reload: func() { c.reload() }, draining: c.disc.withdraw}
	}
	served := d.serve(p)
	sp.Serving()
	return untilStopped(sigs, served, on, p, cfg.ShutdownTimeout, log)
}

// restart is what a serving process does when the channel from its
// supervisor ends: it stops, so that the supervisor starts it afresh.
func restart(log *slog.Logger) func(error) {
	return func(err error) {
		log.Error("channel from the supervisor ended; stopping so that it restarts this process", "err", err)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}

// reconfigure returns what a serving process does with a configuration
// the control validated and sent: what a reload changes live is the
// pools and routes (with the backends' TLS settings), the certificates
// and session-ticket keys, the log level, and acme.domains: the names
// whose ACME challenges it answers and whose certificates it serves
// (config.LiveKeys).
func reconfigure(f *flags, plane *dataplane.Plane, d *doors, certs *acme.Serving, lg *logs, log *slog.Logger) func(supervisor.ConfigSource) {
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
		servingNames(certs, next)
		log.Debug("configuration applied", "generation", src.Generation)
	}
}
