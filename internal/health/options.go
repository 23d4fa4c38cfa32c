package health

import (
	"log/slog"

	"relay/internal/fds"
)

// Option changes a Checker built by New. A nil argument keeps the default.
type Option func(*Checker)

// WithLogger sets where transitions are logged. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *Checker) {
		if l != nil {
			c.log = l
		}
	}
}

// WithProbe replaces the HTTP or TCP probe chosen by Config.Type, so tests
// can script results without a network.
func WithProbe(p Probe) Option {
	return func(c *Checker) {
		if p != nil {
			c.probe = p
		}
	}
}

// WithClock sets the time source of the probe loops. The default is the
// real clock.
func WithClock(clk Clock) Option {
	return func(c *Checker) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithRand sets the source of start offsets: it returns a uniformly random
// integer in [0, n). The default is math/rand/v2's Int64N.
func WithRand(randN func(n int64) int64) Option {
	return func(c *Checker) {
		if randN != nil {
			c.randN = randN
		}
	}
}

// WithDescriptors has every probe take its descriptor from b, the
// process's budget (package fds). A backend whose probe finds no place is
// not probed until one is free, and keeps its state: relay's shortage is
// not the backend's failure. nil, the default, bounds nothing.
func WithDescriptors(b *fds.Budget) Option {
	return func(c *Checker) { c.fds = b }
}
