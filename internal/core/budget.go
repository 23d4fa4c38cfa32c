package core

import (
	"sync/atomic"
	"time"
)

// budget limits a pool's retries to a share of its recent requests, as
// Envoy's retry budgets and Finagle's do: every request earns percent/100
// of a retry, every retry spends one. When a whole pool fails, retries can
// add at most that share to the load instead of multiplying it by the
// retry count. Earnings are capped at budgetBurst retries, so a long quiet
// spell does not bank a flood for the next outage. Beyond the earnings,
// floor retries a second are always allowed, so a relay with little
// traffic can still retry.
type budget struct {
	earn  int64        // milli-retries earned per request; 0: no budget
	floor int64        // retries a second allowed beyond the earnings
	milli atomic.Int64 // earned, in thousandths of a retry
	sec   atomic.Int64 // the second floorUsed counts in
	used  atomic.Int64 // floor retries taken in sec
}

// budgetBurst is the most retries the earnings hold.
const budgetBurst = 10

func newBudget(percent, floor int) *budget {
	return &budget{earn: int64(percent) * 10, floor: int64(floor)}
}

// request credits one request. At the cap it only reads, so a healthy
// pool's requests write nothing shared here.
func (b *budget) request() {
	if b.earn == 0 || b.milli.Load() >= budgetBurst*1000 {
		return
	}
	b.milli.Add(b.earn)
}

// retry reports whether one retry may go out, and spends it.
func (b *budget) retry() bool {
	if b.earn == 0 {
		return true
	}
	if b.milli.Add(-1000) >= 0 {
		return true
	}
	b.milli.Add(1000)
	now := time.Now().Unix()
	if s := b.sec.Load(); s != now && b.sec.CompareAndSwap(s, now) {
		b.used.Store(0)
	}
	return b.used.Add(1) <= b.floor
}
