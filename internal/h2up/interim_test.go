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
// relay hold every one of them until the stream ends. (maxInterim bounds
// their number too.)
func TestInterimHeadsAreNotKept(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := sendHead(t, c, get("/"))
	defer s.Close()
	h := f.until("the request head", isHeaders).(*http2.MetaHeadersFrame)
	id := h.StreamID
	hint := strings.Repeat("h", 1000)
	const interim = maxInterim - 6
	for i := range interim {
		f.head(id, false, ":status", "100", "x-hint-"+strconv.Itoa(i), hint)
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := s.ReadHead()
		if err != nil || got.Status != 100 || field(got.Fields, "x-hint-"+strconv.Itoa(i)) != hint {
			t.Fatalf("interim head %d: %d %v, %v", i, got.Status, got.Fields, err)
		}
	}
	// A burst, read after it has all come: the heads not yet read keep
	// their fields while those read before go, and so do the final
	// head and the trailers that came behind them.
	const burst = 6
	for i := range burst {
		f.head(id, false, ":status", "103", "link", "</"+strconv.Itoa(i)+">")
	}
	f.head(id, false, ":status", "200", "x-final", "yes")
	f.head(id, true, "grpc-status", "0", "x-trailer", "t")
	waitFor(t, "the burst and the trailers", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return s.trailers != nil
	})
	for i := range burst {
		got, err := s.ReadHead()
		if err != nil || got.Status != 103 || len(got.Fields) != 1 || field(got.Fields, "link") != "</"+strconv.Itoa(i)+">" {
			t.Fatalf("burst head %d: %d %v, %v", i, got.Status, got.Fields, err)
		}
	}
	got, err := s.ReadHead()
	if err != nil || got.Status != 200 || len(got.Fields) != 1 || field(got.Fields, "x-final") != "yes" {
		t.Fatalf("final head: %d %v, %v", got.Status, got.Fields, err)
	}
	if _, err := readAll(t, s); err != nil {
		t.Fatal(err)
	}
	if tr := s.Trailers(); len(tr) != 2 || field(tr, "grpc-status") != "0" || field(tr, "x-trailer") != "t" {
		t.Fatalf("trailers %v", tr)
	}
	c.mu.Lock()
	kept := len(s.fields)
	c.mu.Unlock()
	if kept > 3 {
		t.Fatalf("the stream keeps %d fields after %d interim heads were read, want those of the heads not yet read only", kept, interim)
	}
}

// TestInterimHeadsAreBounded checks that a backend sending informational
// heads without end gets its stream reset once past maxInterim, and the
// reader a clear error, rather than relay passing them on for ever.
func TestInterimHeadsAreBounded(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := sendHead(t, c, get("/"))
	defer s.Close()
	id := f.until("the request head", isHeaders).(*http2.MetaHeadersFrame).StreamID
	for range maxInterim + 1 {
		f.head(id, false, ":status", "103", "link", "</a>")
	}
	rst := f.until("RST_STREAM", func(fr http2.Frame) bool { _, ok := fr.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if rst.StreamID != id || rst.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("relay reset stream %d with %v, want %d with ENHANCE_YOUR_CALM", rst.StreamID, rst.ErrCode, id)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for n := 0; err == nil; n++ {
		if _, err = s.ReadHead(); err == nil && n > maxInterim {
			t.Fatal("more heads read than relay takes")
		}
	}
	if !strings.Contains(err.Error(), "informational") {
		t.Fatalf("reading past the bound: %v, want it named", err)
	}
}
