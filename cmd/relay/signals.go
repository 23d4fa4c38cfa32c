package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"relay/internal/proxy"
)

// catchSignals starts catching the signals relay acts on. It comes first:
// one that arrives while the backends are probed is handled once relay
// serves, instead of killing it (SIGHUP's default). In a serving process
// (child), standard output is a pipe to the supervisor: if the supervisor
// is gone, log writes fail with EPIPE and the process drains anyway,
// instead of dying of SIGPIPE.
func catchSignals(child bool) chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	if child {
		signal.Ignore(syscall.SIGPIPE)
	}
	return sigs
}

// onSignals is what relay alone does on SIGUSR1 (reopen) and SIGHUP
// (reload), and as it begins to drain (draining). A serving process has
// none of them: the first two are its supervisor's business, which tells
// it over the channel.
type onSignals struct {
	reopen, reload, draining func()
}

// untilStopped serves until a door fails, which it returns, or SIGINT or
// SIGTERM, when p drains within window and it returns nil.
func untilStopped(sigs <-chan os.Signal, served <-chan error, on onSignals, p *proxy.Proxy, window time.Duration, log *slog.Logger) error {
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGUSR1 && on.reopen != nil:
				on.reopen()
				continue
			case sig == syscall.SIGHUP && on.reload != nil:
				on.reload()
				continue
			case sig == syscall.SIGUSR1 || sig == syscall.SIGHUP:
				continue
			}
			log.Info("shutting down", "signal", sig.String(), "window", window.String(), "connections", p.Connections())
			if on.draining != nil {
				on.draining()
			}
			ctx, cancel := context.WithTimeout(context.Background(), window)
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
