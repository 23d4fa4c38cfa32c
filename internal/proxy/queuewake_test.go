package proxy

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
)

// holdBackend answers after its release channel closes; started counts
// the requests it has begun to answer.
func holdBackend(t *testing.T, name string) (*httpBackend, chan struct{}) {
	release := make(chan struct{})
	hb := newHTTPBackend(t, name, 1, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(ioTimeout):
		}
		w.Write([]byte(name))
	})
	return hb, release
}

// Queued requests are served as soon as places open that no ending
// request announced. The longest waiter finds them within a tick, and each
// one that gets a place wakes the next, so all forty reach the new
// backend at once (which holds them), long before the busy one frees its
// place. The new backend comes either way nothing announces: an operator
// enables it, or it joins the pool.
func TestQueuedRequestsTakePlacesThatOpenWithoutARequestEnding(t *testing.T) {
	for _, how := range []string{"enabled", "added"} {
		t.Run(how, func(t *testing.T) {
			const waiting = 40
			busy, releaseBusy := holdBackend(t, "busy")
			defer close(releaseBusy)
			busy.b.SetMaxRequests(1)
			spare, releaseSpare := holdBackend(t, "spare")
			members := []*backend.Backend{busy.b}
			if how == "enabled" {
				spare.b.SetDisabled(true)
				members = append(members, spare.b)
			}
			r := startRelay(t, Config{}, members...)
			cl := newClient(t, waiting+1, "")

			held := make(chan result, 1)
			go func() { held <- get(t, cl, r.url+"/") }()
			eventually(t, "the busy backend holding its one place", func() bool { return busy.hits.Load() == 1 })
			var wg sync.WaitGroup
			queued := make(chan result, waiting)
			for range waiting {
				wg.Go(func() { queued <- get(t, cl, r.url+"/") })
			}
			eventually(t, "the requests queued", func() bool { return r.p.pool().Queued() == waiting })
			opened := time.Now()
			if how == "enabled" {
				spare.b.SetDisabled(false)
			} else {
				r.p.pool().SetBackends([]*backend.Backend{busy.b, spare.b})
			}
			eventually(t, "every queued request at the new backend", func() bool { return spare.hits.Load() == waiting })
			t.Logf("%d queued requests at the new backend %v after it was %s", waiting, time.Since(opened), how)
			if d := time.Since(opened); d > 350*time.Millisecond {
				t.Errorf("the %d queued requests reached the new backend %v after it was %s, want about a tick (%v)",
					waiting, d, how, 100*time.Millisecond)
			}
			close(releaseSpare)
			wg.Wait()
			close(queued)
			for res := range queued {
				if res.status != 200 || res.backend != "spare" {
					t.Errorf("queued request: %d from %q, want 200 from spare", res.status, res.backend)
				}
			}
			if busy.hits.Load() != 1 {
				t.Errorf("the busy backend got %d requests, want its one", busy.hits.Load())
			}
		})
	}
}

// A pool of more backends than one request remembers: with all ten at
// their limit, the excess waits in the queue instead of getting 503.
func TestQueueServesPoolsLargerThanAPicksMemory(t *testing.T) {
	var hbs []*httpBackend
	for i := range 10 {
		hb, _ := concurrencyBackend(t, 200*time.Millisecond)
		hb.b.SetMaxRequests(1)
		hbs = append(hbs, hb)
		_ = i
	}
	r := startRelay(t, Config{}, backendsOf(hbs...)...)
	cl := newClient(t, 25, "")
	statuses := getConcurrently(t, cl, r.url+"/", 25, 1)
	if statuses[200] != 25 {
		t.Errorf("statuses %v, want 25 times 200: ten served at once, the rest after queueing", statuses)
	}
	for _, hb := range hbs {
		if n := hb.hits.Load(); n < 1 || n > 3 {
			t.Errorf("%s got %d requests, want 2 or 3 (25 over 10 backends)", hb.b.Name, n)
		}
	}
	expectNoneInFlight(t, r)
}

// A queued request whose client goes away is never sent: the backend
// sees only the request that held its place.
func TestQueuedRequestOfAClientThatLeftIsNotSent(t *testing.T) {
	busy, release := holdBackend(t, "busy")
	busy.b.SetMaxRequests(1)
	cfg := withDefaults(Config{})
	cfg.Pool.QueueTimeout = time.Minute
	r := startRelayExactly(t, cfg, busy.b)
	cl := newClient(t, 2, "")
	held := make(chan result, 1)
	go func() { held <- get(t, cl, r.url+"/") }()
	eventually(t, "the backend holding its one place", func() bool { return busy.hits.Load() == 1 })

	c, _ := dialRelay(t, r)
	write(t, c, "GET /left HTTP/1.1\r\nHost: x\r\n\r\n")
	eventually(t, "the request queued", func() bool { return r.p.pool().Queued() == 1 })
	c.Close()
	time.Sleep(300 * time.Millisecond) // a few looks at whether the client is there
	if n := r.p.pool().Queued(); n != 0 {
		t.Errorf("%d requests still queued 300 ms after their client left", n)
	}
	close(release)
	if res := <-held; res.status != 200 {
		t.Fatalf("held request: %d", res.status)
	}
	// Anything still to be sent would go now that the place is free.
	time.Sleep(300 * time.Millisecond)
	if n := busy.hits.Load(); n != 1 {
		t.Errorf("the backend got %d requests, want 1: the left client's request must not be sent", n)
	}
	expectNoneInFlight(t, r)
}
