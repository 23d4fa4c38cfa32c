package main

import (
	"context"
	"log/slog"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/fds"
	"relay/internal/health"
)

// checkOf is how a pool's health_check section checks its members.
func checkOf(hc config.HealthCheck) health.Config {
	return health.Config{
		Type:        hc.Type,
		Path:        hc.Path,
		GRPCService: hc.GRPCService,
		Interval:    hc.Interval,
		Timeout:     hc.Timeout,
		Rise:        hc.Rise,
		Fall:        hc.Fall,

		ReuseConnection: hc.ReuseConnection,
	}
}

// checksStarter is how the control starts the active checks of one check
// setting: each probe round's descriptors come from budget.
func checksStarter(budget *fds.Budget, log *slog.Logger) control.StartChecks {
	return func(cfg health.Config, targets []*backend.Backend, onChange func(*backend.Backend, bool)) (control.Checker, error) {
		return startChecks(cfg, targets, onChange, budget, log)
	}
}

// startChecks builds a checker of bs under cfg, probes every backend
// once, so the state relay starts from is accurate, and then keeps
// checking them until its Stop is called.
func startChecks(cfg health.Config, bs []*backend.Backend, onChange func(*backend.Backend, bool), budget *fds.Budget, log *slog.Logger) (*health.Checker, error) {
	c, err := health.New(cfg, bs, onChange, health.WithLogger(log), health.WithDescriptors(budget))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+time.Second)
	c.CheckAll(ctx)
	cancel()
	c.Run(context.Background())
	return c, nil
}
