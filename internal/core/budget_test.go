package core

import (
	"net/url"
	"strconv"
	"testing"

	"relay/internal/backend"
)

// budgetPool is a pool's budget and the pool whose members' counts it
// reads, used as forward uses them: a request is credited, then sent to
// the first member.
type budgetPool struct {
	p  *Pool
	b  *budget
	bs []*backend.Backend
}

func newBudgetPool(t *testing.T, percent, floor int) *budgetPool {
	t.Helper()
	pc := poolConfig("budget")
	pc.RetryBudgetPercent, pc.RetryBudgetFloor = percent, floor
	p, err := New(Config{}).AddPool(pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	bp := &budgetPool{p: p, b: p.cfg().budget}
	bp.add(t)
	return bp
}

// add makes a new backend a member, first in line for requests.
func (bp *budgetPool) add(t *testing.T) *backend.Backend {
	t.Helper()
	be, err := backend.New(&url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(1+len(bp.bs))}, 1)
	if err != nil {
		t.Fatal(err)
	}
	bp.bs = append([]*backend.Backend{be}, bp.bs...)
	bp.p.SetBackends(bp.bs)
	return be
}

func (bp *budgetPool) send() { bp.bs[0].Acquire(); bp.bs[0].Release() }

func (bp *budgetPool) request(sec int64) {
	bp.b.request(sec)
	bp.send()
}

// retries counts the retries allowed in second sec, asking up to n times;
// each one allowed is sent.
func (bp *budgetPool) retries(sec int64, n int) int {
	ok := 0
	for range n {
		if bp.b.retry(sec) != noRetry {
			bp.send()
			ok++
		}
	}
	return ok
}

func TestBudgetIsAShareOfTheLastSecondsRequests(t *testing.T) {
	p := newBudgetPool(t, 20, 3)
	// A quiet relay can retry the floor each second, and the burst banked.
	for range 10 {
		p.request(100)
	}
	if got := p.retries(100, 50); got != 2+3 {
		t.Errorf("after 10 requests: %d retries, want 2 earned + 3 floor", got)
	}
	// 1,000 requests a second: the bank holds what one second earned, so
	// a backend that dies under this load can have 200 requests retried at
	// once.
	for range 1000 {
		p.request(101)
	}
	for range 1000 {
		p.request(102)
	}
	if got := p.retries(102, 1000); got != 200+3 {
		t.Errorf("at 1,000 requests a second: %d retries at once, want 200 earned + 3 floor", got)
	}
	// Every request failing from here on: each earns a fifth of a retry.
	allowed := 0
	for sec := int64(103); sec < 113; sec++ {
		for range 1000 {
			p.request(sec)
			allowed += p.retries(sec, 2)
		}
	}
	if max := 10*(200+3) + 3; allowed > max || allowed < 10*200 {
		t.Errorf("10 s of 1,000 failing requests a second: %d retries, want 20%% of them plus the floor (at most %d)", allowed, max)
	}
	// After a quiet spell, only the minimum burst is banked.
	for sec := int64(200); sec < 202; sec++ {
		for range 1000 {
			p.request(sec)
		}
	}
	if p.b.milli.Load() != 200*1000 {
		t.Fatalf("banked %d milli-retries at 1,000 requests a second, want 200,000", p.b.milli.Load())
	}
	p.request(205)
	if got := p.retries(205, 100); got != budgetBurst+3 {
		t.Errorf("after a quiet spell: %d retries at once, want %d banked + 3 floor", got, budgetBurst)
	}
}

func TestBudgetOff(t *testing.T) {
	p := newBudgetPool(t, 0, 0)
	if got := p.retries(1, 100); got != 100 {
		t.Errorf("no budget: %d of 100 retries allowed", got)
	}
}

// A request that read the clock just before a second ended may arrive
// after another rolled to the next second: the budget stays in the new
// second, with its cap and floor.
func TestBudgetSecondNeverGoesBackwards(t *testing.T) {
	p := newBudgetPool(t, 20, 3)
	for range 1000 {
		p.request(100)
	}
	p.request(101) // rolls: 1,000 requests earned 200 retries of cap
	p.request(100) // late
	if got := p.b.sec.Load(); got != 101 {
		t.Fatalf("after a late request the budget is in second %d, want 101", got)
	}
	if got := p.b.cap.Load(); got != 200*1000 {
		t.Errorf("cap %d milli-retries after the late request, want 200,000", got)
	}
	// The floor is not refreshed by a late retry either.
	p.b.milli.Store(0)
	if got := p.retries(101, 10) + p.retries(100, 10); got != 3 {
		t.Errorf("%d floor retries in second 101 with late callers, want 3", got)
	}
}

// A member that leaves takes its count with it, and one that joins brings
// its own: neither may move the budget. The second after a backend is
// removed (a dead one taken out, when retries are needed most) keeps what
// the traffic earned, and one re-added with a long history does not inflate
// the cap.
func TestBudgetHoldsAcrossMembershipChanges(t *testing.T) {
	bp := newBudgetPool(t, 20, 0)
	old := bp.bs[0]
	for sec := int64(1); sec <= 3; sec++ {
		for range 1000 {
			bp.request(sec)
		}
	}
	// Replace the member that took all 3,000 attempts by a new one.
	bp.bs = nil
	bp.add(t)
	for range 1000 {
		bp.request(4)
	}
	bp.request(5)
	if got := bp.b.cap.Load(); got != 200*1000 {
		t.Errorf("cap %d milli-retries after a member was replaced, want 200,000 (1,000 attempts a second)", got)
	}
	// The old member, with its 3,000, joins again.
	bp.bs = append(bp.bs, old)
	bp.p.SetBackends(bp.bs)
	for range 999 {
		bp.request(5)
	}
	bp.request(6)
	if got := bp.b.cap.Load(); got != 200*1000 {
		t.Errorf("cap %d milli-retries after a member with a history joined, want 200,000", got)
	}
}
