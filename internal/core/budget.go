package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// budget limits a pool's retries to a share of its recent requests, as
// Envoy's retry budgets and Finagle's do: every request earns percent/100
// of a retry, every retry spends one. When a whole pool fails, retries add
// at most that share to the load instead of multiplying it by the retry
// count. The earnings banked are capped at what the last second's attempts
// earned (at least budgetBurst retries), so a backend that dies under load
// can have every request it held retried at once, while a long quiet spell
// does not bank a flood for the next outage.
//
// The floor: beyond the earnings, floor retries a second are always
// allowed, from the pool's first second on (retry_budget_floor, 3 by
// default, as Envoy's min_retry_concurrency is 3). A pool at low traffic
// earns next to nothing, and without it would refuse the retry that takes
// a request from a backend that just died to one that is up.
//
// A retry that a backend answers (with a status the breakers do not count
// as a failure) gives back what it spent, as gRPC's retry throttling counts
// successes back in: the budget bounds retries that fail. A pool where one
// backend fails and the others answer its requests' retries spends
// nothing, whatever the share of requests that land on the failing one;
// a pool that fails as a whole gets no refunds and is held to the share.
//
// The second's attempts are not counted here: the pool's backends count
// every request sent to them already (Backend.Served), and the budget
// reads their total, through attempts, once a second. A request that finds
// the bank full writes nothing shared.
type budget struct {
	epoch    time.Time     // seconds count from here, on the monotonic clock
	earn     int64         // milli-retries earned per request; 0: no budget
	floor    int64         // retries a second allowed beyond the earnings
	attempts func() uint64 // the pool's attempts so far (Pool.attempts)
	milli    atomic.Int64  // earned and not spent, in thousandths of a retry
	cap      atomic.Int64  // most milli-retries milli may hold
	sec      atomic.Int64  // the second (since epoch) seen and used count in
	used     atomic.Int64  // floor retries taken in sec
	rolling  sync.Mutex    // held by the one caller that starts a second
	seen     uint64        // attempts when sec began; under rolling
}

// budgetBurst is the fewest retries the earnings may hold.
const budgetBurst = 10

func newBudget(percent, floor int, attempts func() uint64) *budget {
	b := &budget{epoch: time.Now(), earn: int64(percent) * 10, floor: int64(floor), attempts: attempts}
	b.cap.Store(budgetBurst * 1000)
	return b
}

// second is the second t falls in, counted on the monotonic clock so that
// a step of the wall clock neither stalls nor rewinds the budget.
func (b *budget) second(t time.Time) int64 { return int64(t.Sub(b.epoch) / time.Second) }

// request credits one request arriving in second sec. Below the cap it
// adds to the earnings.
func (b *budget) request(sec int64) {
	if b.earn == 0 {
		return
	}
	if sec > b.sec.Load() {
		b.roll(sec)
	}
	if b.milli.Load() < b.cap.Load() {
		b.milli.Add(b.earn)
	}
}

// grant is what a retry the budget allowed spent, so that it can be given
// back.
type grant uint8

const (
	noRetry    grant = iota // refused: the budget is spent
	freeRetry               // nothing: no budget, or not a retry
	bankRetry               // one retry of the earnings
	floorRetry              // one of the second's floor retries
)

// retry reports whether one retry may go out in second sec, and spends it:
// from the earnings, or else from the second's floor.
func (b *budget) retry(sec int64) grant {
	if b.earn == 0 {
		return freeRetry
	}
	if b.milli.Add(-1000) >= 0 {
		return bankRetry
	}
	b.milli.Add(1000)
	if sec > b.sec.Load() {
		b.roll(sec)
	}
	if b.used.Add(1) <= b.floor {
		return floorRetry
	}
	b.used.Add(-1) // used counts the floor retries granted, for refunds
	return noRetry
}

// refund gives back what a retry granted in second sec spent: to the
// earnings, up to their cap, or to the floor of sec if that is still the
// current second. (A second starting between the check and the refund
// leaves the new one a floor retry more; that is all a race can do.)
func (b *budget) refund(sec int64, g grant) {
	switch g {
	case bankRetry:
		if b.milli.Load() < b.cap.Load() {
			b.milli.Add(1000)
		}
	case floorRetry:
		if b.sec.Load() == sec {
			b.used.Add(-1)
		}
	}
}

// roll starts second sec: the cap becomes what the last second's attempts
// earned (the minimum burst when a quiet second came between), the floor
// is fresh, and earnings above the new cap are let go. One caller does it
// while others wait; a caller that read the clock before another rolled on
// changes nothing, so the second never goes backwards. A total below the
// last one (a membership change read halfway, see Pool.attempts) keeps the
// cap as it was rather than cut the bank when retries may be needed most.
func (b *budget) roll(sec int64) {
	b.rolling.Lock()
	defer b.rolling.Unlock()
	s := b.sec.Load()
	if sec <= s {
		return
	}
	total := b.attempts()
	prev := b.seen
	b.seen = total
	c := b.cap.Load()
	switch {
	case sec != s+1:
		c = budgetBurst * 1000
	case total >= prev:
		c = max(budgetBurst*1000, int64(total-prev)*b.earn)
	}
	b.cap.Store(c)
	b.used.Store(0)
	if b.milli.Load() > c {
		b.milli.Store(c)
	}
	b.sec.Store(sec)
}
