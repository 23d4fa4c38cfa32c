// Command relay is a Layer-7 HTTP load balancer and reverse proxy.
//
//	relay -config config.yml          # run from a file
//	relay -backends http://127.0.0.1:8001,http://127.0.0.1:8002 -port 8080
//	relay -check -config config.yml   # validate and exit
//	relay -demo                       # three demo backends and a balancer on :8080
//	relay -version                    # print the version and exit
//
// Flags override the file. SIGINT and SIGTERM drain in-flight requests and
// exit; SIGHUP reloads the configuration file; SIGUSR1 reopens (rotates)
// the log file and the access log file. With processes: N relay runs
// N serving processes under a supervisor (internal/supervisor).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/core"
	"relay/internal/dataplane"
	"relay/internal/logging"
	"relay/internal/proxy"
	"relay/internal/supervisor"
	"relay/internal/version"
)

// flags are the command line settings.
type flags struct {
	config    string
	check     bool
	explain   string
	headers   headerFlags
	demo      bool
	version   bool
	overlay   config.Overlay
	backends  string
	algorithm string
}

// errUsage reports a command line that was wrong; the problem and the usage
// have been printed already.
var errUsage = errors.New("usage")

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "YAML configuration `file` (default config.yml when it exists)")
	fs.BoolVar(&f.check, "check", false, "validate the configuration, print every problem, and exit")
	fs.StringVar(&f.explain, "explain", "", "print how the configuration routes the `request` \"METHOD URL\" (e.g. \"GET https://api.example.com/v1/users\") and exit")
	fs.Var(&f.headers, "header", "a `field` \"Name: value\" of the request -explain routes; repeat for more")
	fs.BoolVar(&f.version, "version", false, "print relay's version, commit, build time and Go version, and exit")
	fs.BoolVar(&f.demo, "demo", false, "run three demo backends on 127.0.0.1:8001-8003 and balance over them on :8080")
	fs.StringVar(&f.backends, "backends", "", "comma-separated backend `URLs`, each weight 1; replaces the file's backends")
	fs.IntVar(&f.overlay.Port, "port", 0, "`port` to listen on (overrides the file)")
	fs.StringVar(&f.overlay.Listen, "listen", "", "`host:port` to listen on (overrides -port and the file)")
	fs.StringVar(&f.algorithm, "strategy", "", "balancing `algorithm`: "+strings.Join(balance.Names(), ", "))
	fs.StringVar(&f.algorithm, "algorithm", "", "alias of -strategy")
	fs.Func("admin-listen", "admin listener `host:port` (metrics, admin API, dashboard); \"\" turns it off", func(s string) error {
		f.overlay.AdminListen = &s
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: relay [flags]\n\nrelay is a Layer-7 HTTP load balancer. Flags override the configuration file.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return nil, errUsage
	}
	f.overlay.Algorithm = f.algorithm
	for _, s := range strings.Split(f.backends, ",") {
		if s = strings.TrimSpace(s); s != "" {
			f.overlay.Backends = append(f.overlay.Backends, s)
		}
	}
	return f, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its inputs and outputs explicit, so tests can drive it.
func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		// The flag package has printed the problem and the usage.
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.version {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	// A serving process runs the configuration its supervisor loaded,
	// whatever the file says now.
	sp, err := supervisor.Inherited()
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	var src supervisor.ConfigSource
	if sp != nil {
		src = sp.Config
	} else if src, err = readSource(f); err != nil {
		fmt.Fprintln(stderr, err)
		if !f.check {
			fmt.Fprintln(stderr, "relay: refusing to start")
		}
		return 1
	}
	cfg, err := parseConfig(f, src)
	if err == nil {
		err = supervisor.CheckPlatform(cfg)
	}
	if err == nil && sp == nil {
		// What the file names outside relay (the listen host, the log
		// file), checked before anything starts; a serving process runs
		// what its supervisor checked.
		err = cfg.CheckEnvironment()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		if f.check {
			return 1
		}
		fmt.Fprintln(stderr, "relay: refusing to start")
		return 1
	}
	if f.check {
		return report(cfg, stdout, stderr)
	}
	if f.explain != "" {
		return explain(cfg, f, stdout, stderr)
	}
	if f.demo && f.config == "" {
		// The demo's connection cap is nobody's choice: sized to what
		// the open-file limit holds, it starts without the warning a
		// cap an operator set gets when the limit cannot hold it.
		cfg.MaxConnections = supervisor.FitConnections(cfg.MaxConnections)
	}
	if sp == nil && supervisor.ProcessCount(cfg) > 1 {
		err = supervise(f, cfg, src, args, stdout, stderr)
	} else {
		err = serve(f, cfg, src, sp, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	return 0
}

// report is relay -check's verdict on a valid configuration: "ok" on
// stdout, and each warning on stderr, which leave the exit status 0: a
// warning names a likely mistake that relay can run with.
func report(cfg *config.Config, stdout, stderr io.Writer) int {
	name := cfg.Path
	if name == "" {
		name = "configuration"
	}
	ws := cfg.Warnings(configOptions())
	for _, w := range ws {
		fmt.Fprintln(stderr, w.Warning())
	}
	var note string
	switch len(ws) {
	case 0:
	case 1:
		note = ", 1 warning"
	default:
		note = fmt.Sprintf(", %d warnings", len(ws))
	}
	fmt.Fprintf(stdout, "%s: ok (%s)%s\n", name, summary(cfg), note)
	return 0
}

// summary says what a valid configuration serves: its backends and
// algorithm, or with pools and routes how many of each.
func summary(cfg *config.Config) string {
	if len(cfg.Pools) == 0 && len(cfg.Routes) == 0 {
		return fmt.Sprintf("%d backends, %s", len(cfg.Backends), cfg.Algorithm)
	}
	return fmt.Sprintf("%d pools, %d backends, %d routes", len(cfg.AllPools()), cfg.BackendCount(), len(cfg.Routes))
}

// readSource reads the configuration named by -config, config.yml when it
// exists, or the embedded demo configuration for -demo. With none of them
// it returns an empty source: the flags alone must say enough.
func readSource(f *flags) (supervisor.ConfigSource, error) {
	path := f.config
	if path == "" && !f.demo {
		if _, err := os.Stat("config.yml"); err == nil {
			path = "config.yml"
		}
	}
	switch {
	case f.demo && path == "":
		return supervisor.ConfigSource{Generation: 1, Name: "demo.yml", Data: demoConfig}, nil
	case path == "":
		return supervisor.ConfigSource{Generation: 1}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return supervisor.ConfigSource{}, fmt.Errorf("read config: %w", err)
	}
	return supervisor.ConfigSource{Generation: 1, Name: path, Data: data}, nil
}

// parseConfig parses src and lays the flags over it.
func parseConfig(f *flags, src supervisor.ConfigSource) (*config.Config, error) {
	opts := configOptions()
	if src.Name == "" {
		cfg := config.Default()
		return cfg, cfg.Apply(f.overlay, opts)
	}
	return config.ParseOverlay(src.Data, src.Name, f.overlay, opts)
}

// configOptions are what the configuration is checked against: the
// algorithms relay has, and those that ignore weights.
func configOptions() config.Options {
	return config.Options{Algorithms: balance.Names(), IgnoringWeights: balance.IgnoringWeights()}
}

// logWarnings logs what in a valid configuration is likely not what was
// meant (config.Warnings), one line each.
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings(configOptions()) {
		log.Warn("configuration warning", "warning", w.Warning())
	}
}

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
	c, err := startControl(f, cfg, src, lg, config.Listeners{}, budget)
	if err != nil {
		return err
	}
	defer c.stop()
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
		Reload:   func() { c.reload() },
		Control:  c.ctl,
		Admin:    c.adminAddr(),
		Started:  func() { logWarnings(log, cfg); c.disc.announce() },
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
	})
	if err != nil {
		return err
	}
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
	err = control.Follow(sp, control.Updates{
		Membership: func(ms []supervisor.Member) []*backend.Backend { return applyMembership(plane, ms, log) },
		Config: func(src supervisor.ConfigSource) {
			// The control validated it; what a reload changes live is
			// the pool's settings, the certificates and session-ticket
			// keys, the backends' TLS settings and the log level
			// (config.LiveKeys).
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
		},
		Stats:   p.Stats,
		Tickets: d.setTicketKeys,
		Reopen:  func() { access.reopenFile(log) },
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

// applyMembership makes ms the members of the data plane's pools and
// returns the backend of each; a membership it cannot apply is logged and
// the current members stay.
func applyMembership(plane *dataplane.Plane, ms []supervisor.Member, log *slog.Logger) []*backend.Backend {
	dm := make([]dataplane.Member, len(ms))
	for i, m := range ms {
		dm[i] = dataplane.Member{Pool: m.Pool, URL: m.URL, Weight: m.Weight, MaxRequests: m.MaxRequests}
	}
	bs, err := plane.SetMembers(dm)
	if err != nil {
		log.Error("membership from the supervisor refused; keeping the current backends", "err", err)
	} else {
		log.Debug("backends changed", "backends", len(bs))
	}
	return bs
}

// logs are relay's log outputs: the writer the logger and the access log
// share, the logger, and its level, which a reload may change.
type logs struct {
	out    io.Writer
	log    *slog.Logger
	level  *slog.LevelVar
	rotate func() error // reopen or rotate the file; nothing for stdout
	close  func() error
	shared *logging.Shared // the supervisor's file, which its processes append to
}

// openLog opens relay's log: file, or stdout when file is "", and a logger
// at the configured level writing to it. A supervisor (shared) writes the file
// through an Appender beside its processes, serialising its own writers,
// and rotates it for them all.
func openLog(cfg *config.Config, file string, stdout io.Writer, shared bool) (*logs, error) {
	level, err := logging.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	l := &logs{level: new(slog.LevelVar), out: stdout}
	l.level.Set(level)
	switch {
	case shared && file != "":
		if l.shared, err = logging.OpenShared(file, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays); err != nil {
			return nil, err
		}
		l.out, l.rotate, l.close = l.shared, l.shared.Rotate, l.shared.Close
	default:
		o, err := logging.Open(file, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays)
		if err != nil {
			return nil, err
		}
		if file != "" {
			l.out = o
		}
		l.rotate, l.close = o.Rotate, o.Close
	}
	if shared {
		l.out = &supervisor.LockedWriter{W: l.out}
	}
	l.log = logging.NewLogger(l.out, l.level)
	return l, nil
}

// setLevel applies a reloaded log_level.
func (l *logs) setLevel(cfg *config.Config) {
	if level, err := logging.ParseLevel(cfg.LogLevel); err == nil {
		l.level.Set(level)
	}
}

// reopen reopens (rotates) the log file, as SIGUSR1 asks, and logs a
// failure.
func (l *logs) reopen() {
	if err := l.rotate(); err != nil {
		l.log.Error("log rotation failed", "err", err)
	}
}
