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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"relay/internal/balance"
	"relay/internal/config"
	"relay/internal/supervisor"
	"relay/internal/version"
)

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
		if !f.check && f.explain == "" {
			fmt.Fprintln(stderr, "relay: refusing to start")
		}
		return 1
	}
	cfg, err := parseConfig(f, src)
	if err == nil {
		err = supervisor.CheckPlatform(cfg)
	}
	if err == nil && sp == nil && f.explain == "" {
		// What the file names outside relay (the listen host, the log
		// file), checked before anything starts; a serving process runs
		// what its supervisor checked, and -explain only routes.
		err = cfg.CheckEnvironment()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		if f.check || f.explain != "" {
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
	return fmt.Sprintf("%s, %s, %s", count(len(cfg.AllPools()), "pool"), count(cfg.BackendCount(), "backend"), count(len(cfg.Routes), "route"))
}

// count says n things: "1 route", "3 routes".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
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
	return config.Options{Algorithms: balance.Names(), IgnoringWeights: balance.IgnoringWeights(), Hashing: balance.Hashing()}
}

// logWarnings logs what in a valid configuration is likely not what was
// meant (config.Warnings), one line each.
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings(configOptions()) {
		log.Warn("configuration warning", "warning", w.Warning())
	}
}
