package ratelimit

import "fmt"

// The rules of a rate limit's settings, stated once: internal/config
// judges each value it reads by them, in the words of relay's
// configuration file.

// MaxRate bounds a Spec's Rate and Burst. A bucket counts in
// nanoseconds: a rate above a billion a second has no interval between
// tokens, and a burst's window (Burst / Rate seconds) past some 292 years
// overflows, which would refuse every request.
const MaxRate = 1_000_000_000

// CheckRate judges a Spec's Rate: a whole number of tokens a second, from
// 1 to MaxRate.
func CheckRate(n int) error {
	return checkCount(n, "more than 0 requests a second", "requests a second")
}

// CheckBurst judges a Spec's Burst: a whole number of tokens, from 1 to
// MaxRate.
func CheckBurst(n int) error {
	return checkCount(n, "at least 1 request", "requests")
}

// checkCount says what is wrong with a rate or a burst n, or nil. least
// says the lower bound and unit what is counted.
func checkCount(n int, least, unit string) error {
	switch {
	case n < 1:
		return fmt.Errorf("must be %s, got %d", least, n)
	case n > MaxRate:
		return fmt.Errorf("must be at most %d %s, got %d", MaxRate, unit, n)
	}
	return nil
}

// Failures are what a limit over a store may answer while the store is
// unreachable, in the order the configuration lists them.
var Failures = []Failure{FailOpen, FailClosed, FailLocal}

// String returns the configuration's name for f (on_store_error).
func (f Failure) String() string {
	switch f {
	case FailOpen:
		return "allow"
	case FailClosed:
		return "deny"
	case FailLocal:
		return "local"
	}
	return fmt.Sprintf("Failure(%d)", uint8(f))
}

// ParseFailure returns the Failure the configuration's name stands for
// (String's), and whether it names one.
func ParseFailure(name string) (Failure, bool) {
	for _, f := range Failures {
		if f.String() == name {
			return f, true
		}
	}
	return FailOpen, false
}
