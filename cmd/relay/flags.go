package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"relay/internal/balance"
	"relay/internal/config"
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
