package core

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
)

// A freshly started pool with one backend refusing connections and one up:
// every POST that meets the refusing one first is retried on the other,
// however few requests the pool has seen. The budget earns next to
// nothing at that traffic; its floor and the refund of retries that a
// backend answers keep every retry allowed.
func TestFreshPoolRetriesOffARefusingBackend(t *testing.T) {
	dead, up := refusing(t), serving(t, "up", nil)
	pc := testPool()
	pc.BreakerFailures = 0 // every other request meets the refusing backend
	c, p := startPool(t, pc, dead.b, up.b)
	for i := range 20 {
		if r := send(c, "POST", "x"); r.status != 200 || r.body != "up" {
			t.Fatalf("POST %d on a fresh pool: %d %q, want 200 from the backend that is up", i, r.status, r.body)
		}
	}
	if n := p.retries.Load(); n < 10 {
		t.Errorf("%d retries, want one for each of the 10 requests that met the refusing backend", n)
	}
	if n := p.budgetRefusals.Load(); n != 0 {
		t.Errorf("the budget refused %d retries", n)
	}
}

// With every backend down, whatever path a request takes ends in the same
// answer, at once: 503 with Retry-After saying no backend is up. Dead
// backends still in rotation (nothing noticed yet), taken out by checks
// or by breakers (the pool panics and tries them anyway, and the budget
// runs out on the retries), GET or POST.
func TestEveryBackendDownIsAnsweredOneWay(t *testing.T) {
	for _, how := range []string{"in rotation", "checks failing", "breakers open"} {
		t.Run(how, func(t *testing.T) {
			var bs []*backend.Backend
			for range 3 {
				b := refusing(t).b
				switch how {
				case "checks failing":
					b.SetHealthy(false)
				case "breakers open":
					b.Eject(time.Now().Add(time.Hour))
				}
				bs = append(bs, b)
			}
			c, _ := startPool(t, testPool(), bs...)
			const want = "Service Unavailable: no backend is up: every one tried is unreachable\n"
			for i := range 20 {
				method := []string{"GET", "POST"}[i%2]
				r := send(c, method, "x")
				if r.status != 503 || r.body != want || r.retryAfter != RetryAfter {
					t.Fatalf("%s %d: %d %q (Retry-After %q), want 503 %q with Retry-After", method, i, r.status, r.body, r.retryAfter, want)
				}
				if r.took > time.Second {
					t.Errorf("%s %d took %v, want it at once", method, i, r.took)
				}
			}
		})
	}
}

// The answer for no backend up is only given when none may be: backends
// that took the request and failed it get 502, also when the budget
// refused the retry; and a request that met an unreachable backend and
// could not go on (retries off, or the budget spent) while a backend in
// rotation that has been answering was left untried gets 502 for the
// unreachable one.
func TestBackendsThatFailAreNotReportedDown(t *testing.T) {
	a, b := resetting(t), resetting(t)
	pc := testPool()
	pc.BreakerFailures = 0
	c, _ := startPool(t, pc, a.b, b.b)
	if r := send(c, "GET", ""); r.status != 502 || r.body != "Bad Gateway: backend sent no valid response\n" {
		t.Errorf("every backend resetting: %d %q, want 502", r.status, r.body)
	}

	pc.RetryBudgetFloor = 0 // a fresh pool has earned nothing: the retry is refused
	c, p := startPool(t, pc, resetting(t).b, serving(t, "up", nil).b)
	if r := send(c, "GET", ""); r.status != 502 || r.body != "Bad Gateway: backend sent no valid response; retry budget spent\n" ||
		p.budgetRefusals.Load() != 1 {
		t.Errorf("retry refused after a reset: %d %q, want 502 saying the budget is spent", r.status, r.body)
	}

	for _, how := range []string{"retries off", "budget spent"} {
		pc = testPool()
		if how == "retries off" {
			pc.Retries = 0
		} else {
			pc.RetryBudgetFloor = 0
		}
		c, _ = startPool(t, pc, refusing(t).b, serving(t, "up", nil).b)
		want := "Bad Gateway: backend unreachable\n"
		if how == "budget spent" {
			want = "Bad Gateway: backend unreachable; retry budget spent\n"
		}
		if r := send(c, "GET", ""); r.status != 502 || r.body != want {
			t.Errorf("%s, one backend of two refusing: %d %q, want 502 %q", how, r.status, r.body, want)
		}
	}
}

// One backend's breaker is open, a second fails every request but stays
// in rotation (max_ejected_percent holds it there), a third is fine. The
// failing one must cost the clients nothing while the fine one has room:
// every request it fails is retried on the fine one, the retries do not
// run out, and they do not shift the shared position, so first picks
// still split evenly between the two in rotation.
func TestFailingBackendKeptInRotationCostsClientsNothing(t *testing.T) {
	for _, alg := range []string{"round-robin", "weighted-round-robin"} {
		for _, clients := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d clients", alg, clients), func(t *testing.T) {
				open, failing, fine := refusing(t), resetting(t), serving(t, "fine", nil)
				open.b.Eject(time.Now().Add(time.Hour))
				pc := testPool()
				pc.Algorithm = alg
				c, p := startPool(t, pc, open.b, failing.b, fine.b)
				const requests = 210
				var wg sync.WaitGroup
				var mu sync.Mutex
				statuses := map[int]int{}
				for range clients {
					wg.Go(func() {
						for range requests / clients {
							r := send(c, "GET", "")
							mu.Lock()
							statuses[r.status]++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if statuses[200] != requests {
					t.Errorf("statuses %v, want %d times 200 (budget refusals %d)", statuses, requests, p.budgetRefusals.Load())
				}
				if failing.b.Ejected() {
					t.Fatal("the failing backend was ejected past max_ejected_percent")
				}
				// The failing backend takes only first picks.
				share := float64(failing.hits.Load()) / requests
				t.Logf("first picks on the failing backend: %d of %d; the fine one took %d", failing.hits.Load(), requests, fine.hits.Load())
				if share < 0.4 || share > 0.6 {
					t.Errorf("the failing backend had %.0f%% of the first picks, want about half", 100*share)
				}
			})
		}
	}
}
