package h2

import (
	"fmt"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// TestTrailersAfterALengthReachTheClient checks that an HTTP/2 backend's
// trailers reach the client after a body of declared length that was
// still coming when relay sent the head: the last byte of the length
// must not end the client's stream before them.
func TestTrailersAfterALengthReachTheClient(t *testing.T) {
	more := make(chan struct{})
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		hc.Head(id, false, ":status", "200", "content-length", "5")
		hc.Data(id, false, "hel")
		<-more // the client has the head and the first bytes
		hc.Data(id, false, "lo")
		hc.Head(id, true, "x-check", "1")
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr)
	rc.get(1, "/length")
	for sent := false; !sent; {
		if d, ok := rc.next().(*http2.DataFrame); ok && d.StreamID == 1 {
			close(more)
			sent = true
		}
	}
	var body []byte
	var trailers []string
	for ended := false; !ended; {
		switch f := rc.next().(type) {
		case *http2.DataFrame:
			body = append(body, f.Data()...)
			if f.StreamEnded() {
				ended = true
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				trailers = append(trailers, hf.Name+"="+hf.Value)
			}
			ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		}
	}
	if string(body) != "lo" || len(trailers) != 1 || trailers[0] != "x-check=1" {
		t.Fatalf("after the first bytes the client got %q and trailers %v, want \"lo\" and x-check=1", body, trailers)
	}
}

// TestTrailersAfterALengthShortWindow checks that an HTTP/2 backend's
// trailers after a body of declared length reach a client whose window
// is too short for the body: relay reads such a body ahead, and its last
// byte is not the end of a body on a stream.
func TestTrailersAfterALengthShortWindow(t *testing.T) {
	more := make(chan struct{})
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		hc.Head(id, false, ":status", "200", "content-length", "5")
		hc.Data(id, false, "hello")
		<-more // the client has the head
		hc.Head(id, true, "grpc-status", "0")
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.autoWindow = false
	rc.get(1, "/length")
	if head := frameOf(rc, 1); head != "HEADERS[:status=200 content-length=5] end=false" {
		close(more)
		t.Fatalf("with no window the first frame is %s, want the head alone", head)
	}
	close(more)
	rc.fr.WriteWindowUpdate(1, 100)
	got := streamFrames(rc, 1)
	want := []string{`DATA "hello" end=false`, "HEADERS[grpc-status=0] end=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after window: %v, want %v", got, want)
	}
}
