package core

import (
	"sync/atomic"
	"time"

	"relay/internal/backend"
)

// budget limits a pool's retries to a share of its recent requests, as
// Envoy's retry budgets and Finagle's do: every request earns percent/100
// of a retry, every retry spends one. When a whole pool fails, retries add
// at most that share to the load instead of multiplying it by the retry
// count. The earnings banked are capped at what the last second's attempts
// earned (at least budgetBurst retries), so a backend that dies under load
// can have every request it held retried at once, while a long quiet spell
// does not bank a flood for the next outage. Beyond the earnings, floor
// retries a second are always allowed, so a relay with little traffic can
// still retry.
//
// The second's attempts are not counted here: the pool's backends count
// every request sent to them already (Backend.Served), and the budget
// reads their sum once a second. A request that finds the bank full
// writes nothing shared.
type budget struct {
	epoch time.Time     // seconds count from here, on the monotonic clock
	earn  int64         // milli-retries earned per request; 0: no budget
	floor int64         // retries a second allowed beyond the earnings
	milli atomic.Int64  // earned and not spent, in thousandths of a retry
	cap   atomic.Int64  // most milli-retries milli may hold
	sec   atomic.Int64  // the second (since epoch) seen and used count in
	seen  atomic.Uint64 // the members' attempts when sec began
	used  atomic.Int64  // floor retries taken in sec
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

// request credits one request arriving in second sec to a pool of members.
// Below the cap it adds to the earnings.
func (b *budget) request(sec int64, members []*backend.Backend) {
	if b.earn == 0 {
		return
	}
	if sec > b.sec.Load() {
		b.roll(sec, members)
	}
	if b.milli.Load() < b.cap.Load() {
		b.milli.Add(b.earn)
	}
}

// retry reports whether one retry may go out in second sec, and spends it.
func (b *budget) retry(sec int64, members []*backend.Backend) bool {
	if b.earn == 0 {
		return true
	}
	if b.milli.Add(-1000) >= 0 {
		return true
	}
	b.milli.Add(1000)
	if sec > b.sec.Load() {
		b.roll(sec, members)
	}
	return b.used.Add(1) <= b.floor
}

// roll starts second sec: the cap becomes what the last second's attempts
// earned (nothing when a quiet second came between, or members left), the
// floor is fresh, and earnings above the new cap are let go. One caller
// wins the change; a caller that read the clock before another rolled on
// changes nothing, so the second never goes backwards.
func (b *budget) roll(sec int64, members []*backend.Backend) {
	s := b.sec.Load()
	if sec <= s || !b.sec.CompareAndSwap(s, sec) {
		return
	}
	var total uint64
	for _, m := range members {
		total += m.Served()
	}
	prev := b.seen.Swap(total)
	var last int64
	if sec == s+1 && total > prev {
		last = int64(total - prev)
	}
	c := max(budgetBurst*1000, last*b.earn)
	b.cap.Store(c)
	b.used.Store(0)
	if b.milli.Load() > c {
		b.milli.Store(c)
	}
}
