package core

import (
	"net/url"
	"testing"

	"relay/internal/backend"
)

// budgetPool is a budget and the one backend whose attempts it reads, used
// as forward uses them: a request is credited, then sent.
type budgetPool struct {
	b  *budget
	bs []*backend.Backend
}

func newBudgetPool(t *testing.T, percent, floor int) *budgetPool {
	t.Helper()
	be, err := backend.New(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &budgetPool{b: newBudget(percent, floor), bs: []*backend.Backend{be}}
}

func (p *budgetPool) send() { p.bs[0].Acquire(); p.bs[0].Release() }

func (p *budgetPool) request(sec int64) {
	p.b.request(sec, p.bs)
	p.send()
}

// retries counts the retries allowed in second sec, asking up to n times;
// each one allowed is sent.
func (p *budgetPool) retries(sec int64, n int) int {
	ok := 0
	for range n {
		if p.b.retry(sec, p.bs) {
			p.send()
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
