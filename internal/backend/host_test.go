package backend

import (
	"testing"
	"time"
)

// One address in two pools is one Host: its breaker holds it out of both,
// while a check verdict or what an operator does to one membership stays
// with that pool.
func TestHostSharedByMembers(t *testing.T) {
	h, err := NewHost(mustParse(t, "http://127.0.0.1:8001"))
	if err != nil {
		t.Fatal(err)
	}
	web, err := h.Member("web", 1)
	if err != nil {
		t.Fatal(err)
	}
	api, err := h.Member("api", 5)
	if err != nil {
		t.Fatal(err)
	}
	if web.Name != api.Name || web.Weight == api.Weight {
		t.Fatalf("members %q/%d and %q/%d: want one name, own weights", web.Name, web.Weight, api.Name, api.Weight)
	}
	web.SetHealthy(false)
	if web.Available() || !api.Available() {
		t.Fatal("a failing check of one pool must hold only that membership out")
	}
	web.SetHealthy(true)
	web.Eject(time.Now().Add(time.Minute))
	if web.Available() || api.Available() || !api.Ejected() {
		t.Fatal("an ejection through one pool left the address in rotation in the other")
	}
	if web.Fail(); api.ConsecutiveFailures() != 1 {
		t.Fatalf("failures in a row seen through the other pool: %d, want 1", api.ConsecutiveFailures())
	}
	h.Close()
	if !web.Available() || !api.Available() {
		t.Fatal("closing the breaker left a membership out")
	}
	web.SetDraining(true)
	if web.Available() || !api.Available() {
		t.Fatal("a drain in one pool must hold only that membership out")
	}
	if _, err := h.Member("web", 0); err == nil {
		t.Fatal("weight 0 accepted")
	}
}

// A membership's slow start begins when its address comes back from an
// ejection, as well as when it joins.
func TestReturnedFollowsHost(t *testing.T) {
	b, err := New(mustParse(t, "http://127.0.0.1:8001"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.ReturnedAt() != 0 {
		t.Fatal("a new backend has a return time")
	}
	b.Eject(time.Now().Add(time.Minute))
	b.Close()
	at := b.ReturnedAt()
	if at == 0 {
		t.Fatal("an ejection that ended recorded no return")
	}
	b.EndReturn(at)
	if b.ReturnedAt() != 0 {
		t.Fatal("EndReturn kept the address's return")
	}
}
