package main

import (
	"context"
	"log/slog"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/fds"
	"relay/internal/health"
)

// newChecker builds the active health checker of bs from the configuration.
// Probes take their descriptors from budget.
func newChecker(cfg *config.Config, bs []*backend.Backend, onChange func(*backend.Backend, bool), budget *fds.Budget, log *slog.Logger) (*health.Checker, error) {
	return health.New(health.Config{
		Type:     cfg.HealthCheck.Type,
		Path:     cfg.HealthCheck.Path,
		Interval: cfg.HealthCheck.Interval,
		Timeout:  cfg.HealthCheck.Timeout,
		Rise:     cfg.HealthCheck.Rise,
		Fall:     cfg.HealthCheck.Fall,

		ReuseConnection: cfg.HealthCheck.ReuseConnection,
	}, bs, onChange, health.WithLogger(log), health.WithDescriptors(budget))
}

// startChecks builds the checker, probes every backend once, so the state
// relay starts from is accurate, and then keeps checking them until its
// Stop is called.
func startChecks(cfg *config.Config, bs []*backend.Backend, onChange func(*backend.Backend, bool), budget *fds.Budget, log *slog.Logger) (*health.Checker, error) {
	c, err := newChecker(cfg, bs, onChange, budget, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.HealthCheck.Timeout+time.Second)
	c.CheckAll(ctx)
	cancel()
	c.Run(context.Background())
	return c, nil
}
