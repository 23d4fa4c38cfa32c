package h2up

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestInterimHeadsAreNotKept checks that the fields of the informational
// heads a stream has read do not stay with it: a backend answering with
// 100 Continue after 100 Continue, each read as it comes, must not make
// relay hold every one of them until the stream ends.
func TestInterimHeadsAreNotKept(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := sendHead(t, c, get("/"))
	defer s.Close()
	h := f.until("the request head", isHeaders).(*http2.MetaHeadersFrame)
	id := h.StreamID
	hint := strings.Repeat("h", 1000)
	const interim = 300
	for i := range interim {
		f.head(id, false, ":status", "100", "x-hint-"+strconv.Itoa(i), hint)
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := s.ReadHead()
		if err != nil || got.Status != 100 || field(got.Fields, "x-hint-"+strconv.Itoa(i)) != hint {
			t.Fatalf("interim head %d: %d %v, %v", i, got.Status, got.Fields, err)
		}
	}
	f.head(id, true, ":status", "200", "x-final", "yes")
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := s.ReadHead()
	if err != nil || got.Status != 200 || field(got.Fields, "x-final") != "yes" {
		t.Fatalf("final head: %d %v, %v", got.Status, got.Fields, err)
	}
	c.mu.Lock()
	kept := len(s.fields)
	c.mu.Unlock()
	if kept > 4 {
		t.Fatalf("the stream keeps %d fields after %d interim heads were read, want those of the heads not yet read only", kept, interim)
	}
}
