package core

import "testing"

// retries counts the retries b allows in second now, asking up to n times.
func retries(b *budget, now int64, n int) int {
	ok := 0
	for range n {
		if b.retry(now) {
			ok++
		}
	}
	return ok
}

func TestBudgetIsAShareOfTheLastSecondsRequests(t *testing.T) {
	b := newBudget(20, 3)
	// A quiet relay can retry the floor each second, and the burst banked.
	for range 10 {
		b.request(100)
	}
	if got := retries(b, 100, 50); got != 2+3 {
		t.Errorf("after 10 requests: %d retries, want 2 earned + 3 floor", got)
	}
	// 1,000 requests a second: the bank holds what one second earned, so
	// a backend that dies under this load can have 200 requests retried at
	// once.
	for range 1000 {
		b.request(101)
	}
	for range 1000 {
		b.request(102)
	}
	if got := retries(b, 102, 1000); got != 200+3 {
		t.Errorf("at 1,000 requests a second: %d retries at once, want 200 earned + 3 floor", got)
	}
	// Every request failing from here on: each earns a fifth of a retry.
	allowed := 0
	for sec := int64(103); sec < 113; sec++ {
		for range 1000 {
			b.request(sec)
			allowed += retries(b, sec, 2)
		}
	}
	if max := 10*(200+3) + 3; allowed > max || allowed < 10*200 {
		t.Errorf("10 s of 1,000 failing requests a second: %d retries, want 20%% of them plus the floor (at most %d)", allowed, max)
	}
	// After a quiet spell, only the minimum burst is banked.
	for sec := int64(200); sec < 202; sec++ {
		for range 1000 {
			b.request(sec)
		}
	}
	if b.milli.Load() != 200*1000 {
		t.Fatalf("banked %d milli-retries at 1,000 requests a second, want 200,000", b.milli.Load())
	}
	b.request(205)
	if got := retries(b, 205, 100); got != budgetBurst+3 {
		t.Errorf("after a quiet spell: %d retries at once, want %d banked + 3 floor", got, budgetBurst)
	}
}

func TestBudgetOff(t *testing.T) {
	b := newBudget(0, 0)
	if got := retries(b, 1, 100); got != 100 {
		t.Errorf("no budget: %d of 100 retries allowed", got)
	}
}

// A request that read the clock just before a second ended may count
// after another rolled to the next second: the budget stays in the new
// second, with its cap and floor, and counts the request there.
func TestBudgetSecondNeverGoesBackwards(t *testing.T) {
	b := newBudget(20, 3)
	for range 1000 {
		b.request(100)
	}
	b.request(101) // rolls: 1,000 requests earned 200 retries of cap
	b.request(100) // late
	if got := b.sec.Load(); got != 101 {
		t.Fatalf("after a late request the budget is in second %d, want 101", got)
	}
	if got := b.cap.Load(); got != 200*1000 {
		t.Errorf("cap %d milli-retries after the late request, want 200,000", got)
	}
	if got := b.count.Load(); got != 2 {
		t.Errorf("second 101 counts %d requests, want 2", got)
	}
	// The floor is not refreshed by a late retry either.
	b.milli.Store(0)
	if got := retries(b, 101, 10) + retries(b, 100, 10); got != 3 {
		t.Errorf("%d floor retries in second 101 with late callers, want 3", got)
	}
}
