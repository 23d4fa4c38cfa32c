package main

import (
	"errors"
	"io"

	"relay/internal/config"
	"relay/internal/logging"
	"relay/internal/ratelimit"
	"relay/internal/supervisor"
)

// supervise runs relay as the supervisor of its serving processes: the
// control, the active checks and the admin listener live here.
func supervise(f *flags, cfg *config.Config, src supervisor.ConfigSource, args []string, stdout, stderr io.Writer) error {
	lg, err := openLog(cfg, cfg.LogFile, stdout, true)
	if err != nil {
		return err
	}
	defer lg.close()
	log, out := lg.log, lg.out
	// The supervisor's own descriptors: health checks, the admin
	// listener, etcd. It takes no client connections, so the serving
	// processes warn about max_connections, not it.
	budget := supervisor.RaiseFileLimit(log, 0)
	access, err := sharedAccessFile(cfg)
	if err != nil {
		return err
	}
	// The files the processes append to and this process rotates for
	// them: log_file, access_log_file.
	var shared []*logging.Shared
	if lg.shared != nil {
		shared = append(shared, lg.shared)
	}
	if access != nil {
		defer access.Close()
		shared = append(shared, access)
	}
	// Several processes need Linux: say so before anything needs it.
	if err := supervisor.CheckPlatform(cfg); err != nil {
		return err
	}
	// The processes share the buckets of rate limits, so a limit holds
	// for relay as a whole; the table lives as long as the supervisor.
	table, err := ratelimit.CreateShared(0)
	if err != nil {
		return err
	}
	defer table.Close()
	c, err := startControl(f, cfg, src, lg, config.Listeners{}, budget)
	if err != nil {
		return err
	}
	defer func() { c.stop() }() // c.stop grows when ACME starts
	opts := supervisor.Options{
		Config: cfg, Source: src, Args: args,
		Log: log, Out: out, ErrOut: &supervisor.LockedWriter{W: stderr},
		Rotate: func() {
			lg.reopen()
			if access != nil {
				rotateShared(log, access)
			}
			c.ctl.Reopen()
		},
		Reload:  func() { c.reload() },
		Control: c.ctl,
		Shared:  table,
		Admin:   c.adminAddr(),
		Started: func() {
			logWarnings(log, cfg)
			c.disc.announce()
			if err := c.startACME(cfg, cfg.TLSListen, log); err != nil {
				log.Error("ACME did not start; serving the certificates in hand", "err", err)
			}
		},
		Stopping: c.disc.withdraw,
	}
	if f.demo {
		opts.Demo = func() (func(), error) { return startDemoBackends(log) }
	}
	if len(shared) > 0 {
		// The processes append to the files beside the supervisor, so
		// their sizes are watched here and a rotation announced to them
		// all: each reopens its file, rotated or not.
		stop := make(chan struct{})
		defer close(stop)
		go watchSizes(shared, log, c.ctl.Reopen, stop)
	}
	err = supervisor.Run(opts)
	var le *supervisor.ListenError
	if errors.As(err, &le) {
		// Said as when relay listens alone (doors.go): what to type.
		fix := ""
		if le.Key == "listen" {
			fix = listenHint
		}
		return listenFailed(le.Key, le.Key, le.Addr, fix, fileOf(f, cfg), le.Err)
	}
	return err
}
