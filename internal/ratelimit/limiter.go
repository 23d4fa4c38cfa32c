// Package ratelimit decides whether a request may pass a rate limit: a
// token bucket per key, rate tokens a second up to burst.
//
// The request path sees only Limiter, so where the buckets live is the
// implementation's business. A Table keeps them in memory: the process's
// own, or a mapping every serving process of one relay shares, so a limit
// holds for relay as a whole. A store keeps them where relay instances
// share them.
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

// Limiter is a set of token buckets, one per key: the bytes that name a
// client (its address, a header's value), or none for a limit whose
// requests all share one bucket.
type Limiter interface {
	// Take takes a token from key's bucket at now, a time.Now reading,
	// and says whether there was one. It does not keep key, and must not
	// allocate for a key it holds. A limiter in memory never blocks; one
	// over a store may wait for it, as long as its timeout.
	Take(key []byte, now time.Time) Decision
	// Spec returns the settings the limiter enforces.
	Spec() Spec
}

// gcra is the bucket arithmetic every limiter shares, as the generic
// cell rate algorithm states it: a bucket is one number, the theoretical
// arrival time (tat) at which it would be full again. A request at now
// takes a token when tat, moved one interval on, is within burst
// intervals of now. It is the token bucket of Spec, with one word of
// state; times are nanoseconds on one clock.
type gcra struct {
	interval int64 // 1s / Rate: the time one token takes
	window   int64 // Burst * interval: an empty bucket's time to fill
}

func newGCRA(s Spec) gcra {
	iv := int64(time.Second) / int64(s.Rate)
	if iv <= 0 {
		iv = 1
	}
	return gcra{interval: iv, window: iv * int64(s.Burst)}
}

// take returns the bucket's new tat and the decision for a request at
// now against tat.
func (g gcra) take(tat, now int64) (int64, Decision) {
	if tat < now {
		tat = now
	}
	next := tat + g.interval
	if over := next - now - g.window; over > 0 {
		// No token: the bucket stays as it is; one arrives when tat has
		// come within window of now, that is after over.
		return tat, Decision{Wait: time.Duration(over)}
	}
	return next, Decision{Allowed: true, Remaining: int((g.window - (next - now)) / g.interval)}
}
