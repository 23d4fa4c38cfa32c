package fds

import (
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
)

func TestBudgetTakesUpToItsLimit(t *testing.T) {
	b := New(3)
	for i := range 3 {
		if !b.Take() {
			t.Fatalf("take %d refused below the limit", i)
		}
	}
	if !b.Short() {
		t.Fatal("a spent budget does not say so")
	}
	if b.Take() {
		t.Fatal("a take past the limit succeeded")
	}
	if b.Used() != 3 || b.Refused() != 1 {
		t.Fatalf("used %d refused %d, want 3 and 1", b.Used(), b.Refused())
	}
	b.Give()
	if b.Short() || !b.Take() {
		t.Fatal("a place given back cannot be taken again")
	}
}

func TestBudgetHoldsUnderConcurrentTakes(t *testing.T) {
	b := New(50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if b.Take() {
					mu.Lock()
					got++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if got != 50 || b.Used() != 50 {
		t.Fatalf("%d takes succeeded and %d are counted, want 50", got, b.Used())
	}
}

func TestNilBudgetHasNoBound(t *testing.T) {
	var b *Budget
	if !b.Take() || b.Short() || b.Used() != 0 || b.Limit() != 0 {
		t.Fatal("a nil budget bounds something")
	}
	b.Give()
}

func TestReserveKeepsRoomBesideTheBudget(t *testing.T) {
	for _, c := range []struct{ limit, budget int64 }{{1024, 768}, {4096, 3840}, {65536, 65280}, {100, 75}} {
		if got := ForLimit(int(c.limit)).Limit(); got != c.budget {
			t.Errorf("limit %d: budget %d, want %d", c.limit, got, c.budget)
		}
	}
}

func TestExhaustionErrors(t *testing.T) {
	for _, err := range []error{ErrSpent, syscall.EMFILE, syscall.ENFILE,
		&net.OpError{Op: "dial", Err: fmt.Errorf("socket: %w", syscall.EMFILE)}} {
		if !IsExhaustion(err) {
			t.Errorf("%v is not taken for exhaustion", err)
		}
	}
	if IsExhaustion(syscall.ECONNREFUSED) {
		t.Error("a refused connection is taken for exhaustion")
	}
}

// A spent budget has an idle descriptor closed before it refuses: Take
// and Short use the place that frees, and refuse once nothing is idle.
func TestSpentBudgetReclaimsIdleDescriptors(t *testing.T) {
	b := New(2)
	idle := 1 // one of the two places is an idle connection
	b.SetReclaim(func() bool {
		if idle == 0 {
			return false
		}
		idle--
		b.Give() // closing it gives its place back
		return true
	})
	b.Take()
	b.Take()
	if b.Short() {
		t.Fatal("a budget with an idle descriptor to close says it is short")
	}
	if idle != 0 || b.Used() != 1 {
		t.Fatalf("idle %d used %d after Short; want the idle one closed", idle, b.Used())
	}
	if !b.Take() {
		t.Fatal("the place an idle descriptor freed cannot be taken")
	}
	if b.Take() || !b.Short() || b.Refused() != 1 {
		t.Fatalf("with nothing idle: refused %d, short %v; want a refusal", b.Refused(), b.Short())
	}
}
