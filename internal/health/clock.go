package health

import "time"

// Clock is the time source of the probe loops. Production uses the real
// clock; tests supply one whose channels they fire themselves, so probe
// rounds happen on command instead of after sleeps.
type Clock interface {
	// After delivers once, d from now. A loop waits on it for its start offset.
	After(d time.Duration) <-chan time.Time
	// NewTicker delivers every d until stopped. It paces a loop's probes.
	NewTicker(d time.Duration) Ticker
}

// Ticker is the part of time.Ticker a probe loop uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
