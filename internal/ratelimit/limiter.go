// Package ratelimit decides whether a request may pass a rate limit: a
// token bucket per key, rate tokens a second up to burst.
//
// The request path sees only Limiter, so where the buckets live is the
// implementation's business: Local keeps them in the process's memory;
// a limiter shared by the processes of one relay, or by relay instances
// through a store, takes the same calls.
package ratelimit

import (
	"time"
)

// Spec is one rate limit's settings.
type Spec struct {
	// Rate is the tokens added a second; more than 0.
	Rate int
	// Burst is the bucket's size; at least 1.
	Burst int
}

// Decision is a limiter's answer for one request.
type Decision struct {
	// Allowed reports that the request took a token and may pass.
	Allowed bool
	// Remaining is the whole tokens left in the key's bucket after this
	// request.
	Remaining int
	// Wait is how long until the bucket holds a token again: 0 when it
	// holds one now.
	Wait time.Duration
}

// Limiter is a set of token buckets, one per key. Keys are 64-bit
// hashes (HashAddr, HashBytes), so a limiter's memory per key is fixed
// and a store can name a key without knowing what it was made of.
type Limiter interface {
	// Take takes a token from key's bucket at now, a monotonic time
	// (Clock), and says whether there was one. It must not allocate for
	// a key it holds, nor block on I/O.
	Take(key uint64, now time.Duration) Decision
	// Spec returns the settings the limiter enforces.
	Spec() Spec
}

// Clock is a monotonic time for Take: the time since a fixed instant
// of the process.
type Clock struct{ base time.Time }

// NewClock returns a clock that starts now.
func NewClock() Clock { return Clock{base: time.Now()} }

// At returns t (a time.Now reading) on the clock.
func (c Clock) At(t time.Time) time.Duration { return t.Sub(c.base) }

// gcra is the bucket arithmetic every limiter shares, as the generic
// cell rate algorithm states it: a bucket is one number, the theoretical
// arrival time (tat) at which it would be full again. A request at now
// takes a token when tat, moved one interval on, is within burst
// intervals of now. It is the token bucket of Spec, with one word of state.
type gcra struct {
	interval time.Duration // 1s / Rate: the time one token takes
	window   time.Duration // Burst * interval: an empty bucket's time to fill
}

func newGCRA(s Spec) gcra {
	iv := time.Second / time.Duration(s.Rate)
	if iv <= 0 {
		iv = 1
	}
	return gcra{interval: iv, window: iv * time.Duration(s.Burst)}
}

// take returns the bucket's new tat and the decision for a request at
// now against tat.
func (g gcra) take(tat, now time.Duration) (time.Duration, Decision) {
	if tat < now {
		tat = now
	}
	next := tat + g.interval
	if over := next - now - g.window; over > 0 {
		// No token: the bucket stays as it is; one arrives when tat has
		// come within window of now, that is after over.
		return tat, Decision{Wait: over}
	}
	return next, Decision{Allowed: true, Remaining: int((g.window - (next - now)) / g.interval)}
}
