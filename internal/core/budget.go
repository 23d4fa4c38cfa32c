package core

import (
	"sync/atomic"
	"time"
)

// budget limits a pool's retries to a share of its recent requests, as
// Envoy's retry budgets and Finagle's do: every request earns percent/100
// of a retry, every retry spends one. When a whole pool fails, retries add
// at most that share to the load instead of multiplying it by the retry
// count. The earnings banked are capped at what the requests of the last
// second earned (at least budgetBurst retries), so a backend that dies
// under load can have every request it held retried at once, while a long
// quiet spell does not bank a flood for the next outage. Beyond the
// earnings, floor retries a second are always allowed, so a relay with
// little traffic can still retry.
type budget struct {
	epoch time.Time    // seconds count from here, on the monotonic clock
	earn  int64        // milli-retries earned per request; 0: no budget
	floor int64        // retries a second allowed beyond the earnings
	milli atomic.Int64 // earned and not spent, in thousandths of a retry
	cap   atomic.Int64 // most milli-retries milli may hold
	sec   atomic.Int64 // the second (since epoch) count and used count in
	count atomic.Int64 // requests in sec
	used  atomic.Int64 // floor retries taken in sec
}

// budgetBurst is the fewest retries the earnings may hold.
const budgetBurst = 10

func newBudget(percent, floor int) *budget {
	b := &budget{epoch: time.Now(), earn: int64(percent) * 10, floor: int64(floor)}
	b.cap.Store(budgetBurst * 1000)
	return b
}

// second is the second t falls in, counted on the monotonic clock so that
// a step of the wall clock neither stalls nor rewinds the budget.
func (b *budget) second(t time.Time) int64 { return int64(t.Sub(b.epoch) / time.Second) }

// request credits one request arriving in second now. Below the cap it
// adds to the earnings; every request adds one to the second's count,
// which sets the next second's cap.
func (b *budget) request(now int64) {
	if b.earn == 0 {
		return
	}
	if now > b.sec.Load() {
		b.roll(now)
	}
	b.count.Add(1)
	if b.milli.Load() < b.cap.Load() {
		b.milli.Add(b.earn)
	}
}

// retry reports whether one retry may go out in second now, and spends it.
func (b *budget) retry(now int64) bool {
	if b.earn == 0 {
		return true
	}
	if b.milli.Add(-1000) >= 0 {
		return true
	}
	b.milli.Add(1000)
	if now > b.sec.Load() {
		b.roll(now)
	}
	return b.used.Add(1) <= b.floor
}

// roll starts second now: the cap becomes what the last second's requests
// earned (nothing when a quiet second came between), the floor is fresh,
// and earnings above the new cap are let go. One caller wins the change;
// a caller that read the clock before another rolled on changes nothing,
// so the second never goes backwards.
func (b *budget) roll(now int64) {
	s := b.sec.Load()
	if now <= s || !b.sec.CompareAndSwap(s, now) {
		return
	}
	last := b.count.Swap(0)
	if now != s+1 {
		last = 0
	}
	c := max(budgetBurst*1000, last*b.earn)
	b.cap.Store(c)
	b.used.Store(0)
	if b.milli.Load() > c {
		b.milli.Store(c)
	}
}
