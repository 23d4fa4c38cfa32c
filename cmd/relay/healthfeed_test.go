package main

import (
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
)

func feedBackends(t *testing.T, urls ...string) []*backend.Backend {
	t.Helper()
	var bs []*backend.Backend
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		b, err := backend.New(u, 1)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	return bs
}

// TestHealthFeed runs both ends of the feed over a real pipe: the snapshot,
// updates, names the process does not know, and the end of the feed.
func TestHealthFeed(t *testing.T) {
	checked := feedBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003")
	checked[1].SetHealthy(false)
	h := newHealthFeed(checked, slog.New(slog.DiscardHandler))
	r, err := h.attach(0)
	if err != nil {
		t.Fatal(err)
	}
	// The process's configuration lacks 8003 and has 8004.
	served := feedBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8004")
	changes := make(chan struct{}, 10)
	ended := make(chan error, 1)
	err = followHealth(r, served, func() { changes <- struct{}{} }, func(err error) { ended <- err })
	if err != nil {
		t.Fatal(err)
	}
	if !served[0].Healthy() || served[1].Healthy() || !served[2].Healthy() {
		t.Fatalf("after the snapshot: healthy %v %v %v, want true false true",
			served[0].Healthy(), served[1].Healthy(), served[2].Healthy())
	}

	h.changed(checked[2], false) // unknown to the process: ignored
	h.changed(checked[0], false)
	h.changed(checked[0], false) // no change the second time
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("an update was not applied")
	}
	if served[0].Healthy() {
		t.Error("8001 still healthy after its down update")
	}
	h.changed(checked[1], true)
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("an update was not applied")
	}
	select {
	case <-changes:
		t.Error("an update that changed nothing was reported as a change")
	default:
	}
	if !served[1].Healthy() || !served[2].Healthy() {
		t.Error("8002 should be back up, and 8004 untouched")
	}

	h.detach(0)
	select {
	case err := <-ended:
		if !strings.Contains(err.Error(), "supervisor closed it") {
			t.Errorf("feed ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process did not see its feed end")
	}
}

// TestHealthFeedDropsAProcessThatFallsBehind checks that changed never
// blocks on a process that stopped reading, and that such a process sees
// its feed end, so it restarts.
func TestHealthFeedDropsAProcessThatFallsBehind(t *testing.T) {
	bs := feedBackends(t, "http://127.0.0.1:8001")
	h := newHealthFeed(bs, slog.New(slog.DiscardHandler))
	r, err := h.attach(3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan struct{})
	go func() {
		for i := range feedQueue + 70_000/len("0 http://127.0.0.1:8001\n") {
			h.changed(bs[0], i%2 == 0)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("changed blocked on a process that does not read")
	}
	h.mu.Lock()
	_, still := h.feeds[3]
	h.mu.Unlock()
	if still {
		t.Fatal("the process's feed was kept after its queue overflowed")
	}
	readAll := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(r)
		readAll <- err
	}()
	select {
	case err := <-readAll:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the feed of a dropped process did not end")
	}
}

// TestFollowHealthRejectsAMalformedSnapshot checks the process side fails to
// start on a feed it cannot read, naming the line.
func TestFollowHealthRejectsAMalformedSnapshot(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(w, "1 http://127.0.0.1:8001\nup http://127.0.0.1:8002\n\n")
		w.Close()
	}()
	err = followHealth(r, feedBackends(t, "http://127.0.0.1:8001"), func() {}, func(error) {})
	if err == nil || !strings.Contains(err.Error(), `malformed health update "up http://127.0.0.1:8002"`) {
		t.Fatalf("followHealth returned %v", err)
	}
}
