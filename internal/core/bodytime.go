package core

import "time"

// BodyTime is how long a client may take to send a request body, the same
// for every front door: each wait for body bytes is bounded by Idle, and
// the whole body by Timeout plus a second for every MinRate bytes received
// (nginx's client_body_timeout bounds only the waits; the whole-body bound
// is what stops a client trickling a byte at a time).
type BodyTime struct {
	Idle    time.Duration
	Timeout time.Duration // 0: only Idle applies
	MinRate int           // bytes a second; 0: no allowance
}

// Deadline is when the next read of a body started at start, with got
// bytes received so far, must have returned.
func (t *BodyTime) Deadline(now, start time.Time, got int64) time.Time {
	d := now.Add(t.Idle)
	if t.Timeout > 0 {
		whole := start.Add(t.Timeout)
		if t.MinRate > 0 {
			whole = whole.Add(allowance(got, int64(t.MinRate)))
		}
		if whole.Before(d) {
			d = whole
		}
	}
	return d
}

// maxAllowance caps the time a body's bytes earn: far beyond any timeout,
// far below where a time.Duration overflows.
const maxAllowance = 100 * 365 * 24 * time.Hour

// allowance is how long got bytes may take at rate bytes a second: the
// time a body at least that fast has earned beyond the body timeout. It
// holds for any size; got*time.Second alone overflows past 9.2 GB.
func allowance(got, rate int64) time.Duration {
	secs := got / rate
	if secs >= int64(maxAllowance/time.Second) {
		return maxAllowance
	}
	return time.Duration(secs)*time.Second + time.Duration(got%rate)*time.Second/time.Duration(rate)
}
