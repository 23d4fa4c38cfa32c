// Command relay is a Layer-7 HTTP load balancer and reverse proxy.
//
//	relay -config config.yml          # run from a file
//	relay -backends http://127.0.0.1:8001,http://127.0.0.1:8002 -port 8080
//	relay -check -config config.yml   # validate and exit
//	relay -demo                       # three demo backends and a balancer on :8080
//
// Flags override the file. SIGINT and SIGTERM drain in-flight requests and
// exit; SIGHUP reopens (rotates) the log file. With processes: N relay runs
// N serving processes under a supervisor (processes.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/config"
	"relay/internal/logging"
	"relay/internal/proxy"
)

// flags are the command line settings.
type flags struct {
	config    string
	check     bool
	demo      bool
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
	fs.BoolVar(&f.demo, "demo", false, "run three demo backends on 127.0.0.1:8001-8003 and balance over them on :8080")
	fs.StringVar(&f.backends, "backends", "", "comma-separated backend `URLs`, each weight 1; replaces the file's backends")
	fs.IntVar(&f.overlay.Port, "port", 0, "`port` to listen on (overrides the file)")
	fs.StringVar(&f.overlay.Listen, "listen", "", "`host:port` to listen on (overrides -port and the file)")
	fs.StringVar(&f.algorithm, "strategy", "", "balancing `algorithm`: "+strings.Join(balance.Names(), ", "))
	fs.StringVar(&f.algorithm, "algorithm", "", "alias of -strategy")
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
	cfg, err := loadConfig(f)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if f.check {
			return 1
		}
		fmt.Fprintln(stderr, "relay: refusing to start")
		return 1
	}
	if f.check {
		name := cfg.Path
		if name == "" {
			name = "configuration"
		}
		fmt.Fprintf(stdout, "%s: ok (%d backends, %s)\n", name, len(cfg.Backends), cfg.Algorithm)
		return 0
	}
	sp, err := inherited()
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	if sp == nil && processCount(cfg) > 1 {
		err = supervise(cfg, args, f.demo, stdout, stderr)
	} else {
		err = serve(cfg, f.demo && sp == nil, sp, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	return 0
}

// loadConfig reads the file named by -config, config.yml when it exists, the
// embedded demo configuration for -demo, or nothing, and lays the flags over it.
func loadConfig(f *flags) (*config.Config, error) {
	opts := config.Options{Algorithms: balance.Names()}
	path := f.config
	if path == "" && !f.demo {
		if _, err := os.Stat("config.yml"); err == nil {
			path = "config.yml"
		}
	}
	if f.demo && path == "" {
		cfg, err := config.Parse(demoConfig, "demo.yml", opts)
		if err != nil {
			return nil, err
		}
		return cfg, cfg.Apply(f.overlay, opts)
	}
	if path == "" {
		// No file: the flags alone must say enough, -backends above all.
		cfg := config.Default()
		return cfg, cfg.Apply(f.overlay, opts)
	}
	return config.LoadOverlay(path, f.overlay, opts)
}

// serve runs relay until SIGINT or SIGTERM: the whole of it, or with sp
// one of the serving processes a supervisor started, which serves on the
// socket it inherited and writes its log lines to stdout for the
// supervisor to copy.
// buildBackends makes the configured backends, all healthy until checked.
func buildBackends(cfg *config.Config) ([]*backend.Backend, error) {
	bs := make([]*backend.Backend, 0, len(cfg.Backends))
	for _, cb := range cfg.Backends {
		b, err := backend.New(cb.URL, cb.Weight)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

func serve(cfg *config.Config, demo bool, sp *servingProcess, stdout io.Writer) error {
	// Signals first: one that arrives while the backends are probed is
	// handled once relay serves, instead of killing it (SIGHUP's default).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if sp != nil {
		// Standard output is a pipe to the supervisor. If the supervisor
		// is gone, log writes fail with EPIPE and the process drains
		// anyway, instead of dying of SIGPIPE.
		signal.Ignore(syscall.SIGPIPE)
	}
	if n := threadsFor(cfg); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	logFile := cfg.LogFile
	if sp != nil {
		logFile = "" // the supervisor owns the file
	}
	logOut, out, log, err := openLog(cfg, logFile, stdout, false)
	if err != nil {
		return err
	}
	defer logOut.Close()
	if sp != nil {
		log = log.With("process", sp.index)
	}

	if demo {
		stop, err := startDemoBackends(log)
		if err != nil {
			return err
		}
		defer stop()
	}

	bs, err := buildBackends(cfg)
	if err != nil {
		return err
	}
	var access *logging.AccessLog
	if cfg.AccessLog {
		access = logging.NewAccessLog(out)
		defer access.Close()
	}
	pcfg := proxy.ConfigFrom(cfg)
	pcfg.AccessLog, pcfg.Logger = access, log
	p, err := proxy.New(pcfg, bs)
	if err != nil {
		return err
	}

	if sp != nil {
		// The supervisor checks the backends for every process; the pool
		// starts from its snapshot.
		// A transition takes effect on the backend itself: pickers read
		// its state at every pick.
		err := followHealth(sp.health, bs, func() {}, func(err error) {
			log.Error("health feed from the supervisor ended; stopping so that it restarts this process", "err", err)
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
		})
		if err != nil {
			return err
		}
	} else {
		checker, err := newChecker(cfg, bs, nil, log)
		if err != nil {
			return err
		}
		// One probe round before serving, so the pool starts accurate.
		stopChecks := checkFirst(cfg, checker)
		defer stopChecks()
	}

	var ln net.Listener
	if sp != nil {
		ln = sp.ln
		log.Info("process started", "pid", os.Getpid(), "healthy", len(p.Available()), "workers", runtime.GOMAXPROCS(0))
	} else {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		log.Info("relay started", "listen", ln.Addr().String(), "algorithm", cfg.Algorithm,
			"backends", len(bs), "healthy", len(p.Available()), "workers", runtime.GOMAXPROCS(0))
		if cfg.CPUAffinity { // processes: 0 on a single core
			log.Warn("cpu_affinity ignored: it binds serving processes to cores, and there is one process")
		}
	}

	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	if sp != nil {
		sp.serving()
	}
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				rotateLog(log, logOut)
				continue
			}
			log.Info("shutting down", "signal", sig.String(), "window", cfg.ShutdownTimeout.String(), "connections", p.Connections())
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

// openLog opens relay's log: file, or stdout when file is "", and a logger
// at the configured level writing to it (through a lock when several
// writers share it), then raises the open-file limit, warning through
// that logger. out is what the access log should write to.
func openLog(cfg *config.Config, file string, stdout io.Writer, locked bool) (logOut *logging.Output, out io.Writer, log *slog.Logger, err error) {
	level, err := logging.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, nil, nil, err
	}
	logOut, err = logging.Open(file, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays)
	if err != nil {
		return nil, nil, nil, err
	}
	out = stdout
	if file != "" {
		out = logOut
	}
	if locked {
		out = &lockedWriter{w: out}
	}
	log = logging.NewLogger(out, level)
	raiseFileLimit(log, cfg.MaxConnections)
	return logOut, out, log, nil
}

// rotateLog reopens the log file, as SIGHUP asks.
func rotateLog(log *slog.Logger, logOut *logging.Output) {
	if err := logOut.Rotate(); err != nil {
		log.Error("log rotation failed", "err", err)
	}
}
