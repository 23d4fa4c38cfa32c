package core

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"relay/internal/h1"
)

// A body filter hears whether more of the body is there to read at once,
// so that a compressor flushes only before relay waits for the backend.

// filterCall is what one Filter call was given.
type filterCall struct {
	n         int
	end, more bool
}

// recordingFilter passes the body on as it is and records every call.
type recordingFilter struct {
	calls []filterCall
	out   []byte
}

func (f *recordingFilter) Filter(p []byte, end, more bool) ([]byte, error) {
	f.calls = append(f.calls, filterCall{len(p), end, more})
	f.out = append(f.out[:0], p...)
	return f.out, nil
}

func (f *recordingFilter) Release() {}

// filterFeature gives every response body its filter, once wait (when
// set) is closed: the backend has written all it will write by then.
type filterFeature struct {
	f    *recordingFilter
	wait chan struct{}
}

func (*filterFeature) FeatureName() string { return "test filter" }
func (*filterFeature) FiltersBodies()      {}

func (ff *filterFeature) ResponseHead(x *Exchange, resp *h1.Response) {
	if ff.wait != nil {
		<-ff.wait
		time.Sleep(20 * time.Millisecond) // loopback has delivered it long before
	}
	x.respBody.SetFilter(ff.f, resp)
}

// rawBackend answers every request with head and then each of parts,
// gap apart; written is closed once the first answer is written whole.
func rawBackend(t *testing.T, head string, parts [][]byte, gap time.Duration) (addr string, written chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	written = make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		for got := []byte{}; !bytes.Contains(got, []byte("\r\n\r\n")); {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			got = append(got, buf[:n]...)
		}
		c.Write([]byte(head))
		for i, p := range parts {
			if i > 0 {
				time.Sleep(gap)
			}
			c.Write(p)
		}
		close(written)
		c.Read(buf) // until relay closes or the test ends
	}()
	return ln.Addr().String(), written
}

// A body the backend sent whole before relay read it: every call but the
// last is told that more is there, so a compressor would never flush.
func TestFilterHearsMoreOfABodyThatCameWhole(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 3*filterBytes/16+100) // more than 3 reads
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
	addr, written := rawBackend(t, head, [][]byte{body}, 0)
	ff := &filterFeature{f: &recordingFilter{}, wait: written}
	pc := testPool()
	pc.Features = []Feature{ff}
	c, _ := startPool(t, pc, memberAt(t, addr))
	r := send(c, "GET", "")
	if r.status != 200 || r.body != string(body) {
		t.Fatalf("got %d and %d bytes, want 200 and the backend's %d", r.status, len(r.body), len(body))
	}
	calls := ff.f.calls
	if len(calls) < 4 {
		t.Fatalf("%d calls, want one per read of at most %d bytes: %v", len(calls), filterBytes, calls)
	}
	for i, call := range calls {
		last := i == len(calls)-1
		if call.end != last || call.more == last {
			t.Errorf("call %d of %d: end %v, more %v; want end only on the last, more on all the others: %v",
				i+1, len(calls), call.end, call.more, calls)
		}
	}
}

// A body that pauses: the call before the pause is told nothing more is
// there, so a compressor flushes and the client gets the part at once.
func TestFilterHearsABodyPause(t *testing.T) {
	parts := [][]byte{[]byte("first part\n"), []byte("second part\n")}
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(parts[0])+len(parts[1]))
	addr, _ := rawBackend(t, head, parts, 200*time.Millisecond)
	ff := &filterFeature{f: &recordingFilter{}}
	pc := testPool()
	pc.Features = []Feature{ff}
	c, _ := startPool(t, pc, memberAt(t, addr))
	r := send(c, "GET", "")
	if r.status != 200 || r.body != "first part\nsecond part\n" {
		t.Fatalf("got %d %q", r.status, r.body)
	}
	calls := ff.f.calls
	if len(calls) == 0 || calls[0].more || calls[0].end {
		t.Fatalf("the first call must be told that nothing more is there yet and the body goes on: %v", calls)
	}
	if last := calls[len(calls)-1]; !last.end {
		t.Fatalf("the last call must be the end: %v", calls)
	}
}

// failingFilter fails its first call, and counts its releases.
type failingFilter struct{ released int }

var errFilter = errors.New("the filter failed")

func (f *failingFilter) Filter([]byte, bool, bool) ([]byte, error) { return nil, errFilter }
func (f *failingFilter) Release()                                  { f.released++ }

// failingFeature gives every response body a failingFilter.
type failingFeature struct{ f *failingFilter }

func (*failingFeature) FeatureName() string { return "failing filter" }
func (*failingFeature) FiltersBodies()      {}
func (ff *failingFeature) ResponseHead(x *Exchange, resp *h1.Response) {
	x.respBody.SetFilter(ff.f, resp)
}

// A filter that fails ends the body with its error, and is released
// once, as one that finished would be.
func TestFilterReleasedWhenItFails(t *testing.T) {
	body := "a body the filter will not take"
	addr, _ := rawBackend(t, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body)), [][]byte{[]byte(body)}, 0)
	ff := &failingFeature{f: &failingFilter{}}
	pc := testPool()
	pc.Features = []Feature{ff}
	c, _ := startPool(t, pc, memberAt(t, addr))
	if r := send(c, "GET", ""); r.body != "" {
		t.Fatalf("the client got %q through a filter that failed", r.body)
	}
	if ff.f.released != 1 {
		t.Fatalf("released %d times, want once", ff.f.released)
	}
}
