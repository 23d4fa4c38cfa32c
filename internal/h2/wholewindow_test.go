package h2

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// wholeBackend answers every request with a response that comes whole,
// head, body and trailers in one write; the path chooses the trailers:
// /forbidden only fields that may not be trailers, /error a gRPC error.
func wholeBackend(t *testing.T) *front {
	t.Helper()
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		trailers := []string{"grpc-status", "0", "grpc-message", "fine"}
		switch req.PseudoValue("path") {
		case "/forbidden":
			trailers = []string{"content-length", "7", "transfer-encoding", "chunked"}
		case "/error":
			trailers = []string{"grpc-status", "13", "grpc-message", "broken"}
		}
		hc.Write(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
				BlockFragment: hpackBlock(":status", "200", "content-type", "application/grpc")})
			fr.WriteData(id, false, []byte("message"))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
				BlockFragment: hpackBlock(trailers...)})
		})
	})
	return startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
}

// streamFrames reads frames until stream id ends or is reset, and
// describes those of the stream in order (streamFrame).
func streamFrames(rc *rawConn, id uint32) []string {
	var got []string
	for {
		d, last := streamFrame(rc, id)
		got = append(got, d)
		if last {
			return got
		}
	}
}

// streamFrame reads frames until one of stream id, describes it, and
// says whether it is the stream's last.
func streamFrame(rc *rawConn, id uint32) (string, bool) {
	for {
		switch f := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				var fs []string
				for _, hf := range f.Fields {
					fs = append(fs, hf.Name+"="+hf.Value)
				}
				return fmt.Sprintf("HEADERS%v end=%v", fs, f.StreamEnded()), f.StreamEnded()
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				return fmt.Sprintf("DATA %q end=%v", f.Data(), f.StreamEnded()), f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "RST_STREAM " + f.ErrCode.String(), true
			}
		}
	}
}

// frameOf describes the next frame of stream id.
func frameOf(rc *rawConn, id uint32) string {
	d, _ := streamFrame(rc, id)
	return d
}

// sendWindow returns relay's send window on c's connection.
func sendWindow(c *conn) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendWin
}

// zeroWindowCall starts a wholeBackend and a client that grants streams
// no window of its own, and makes a first call on stream 1 with 100
// bytes of window.
func zeroWindowCall(t *testing.T) (*front, *rawConn) {
	t.Helper()
	f := wholeBackend(t)
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.autoWindow = false
	rc.get(1, "/warm", "content-type", "application/grpc")
	rc.fr.WriteWindowUpdate(1, 100)
	return f, rc
}

// TestWholeResponseWaitsForWindow checks a response that came whole
// from the backend, sent to a client whose stream window is smaller than
// its body: the head goes at once, the body as window comes, and the
// trailers after the body; the connection's window is spent by the body
// bytes exactly.
func TestWholeResponseWaitsForWindow(t *testing.T) {
	// One scheduler thread: the backend's three frames are read before
	// the goroutine forwarding the call runs again, so the response is
	// whole when the door takes it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f, rc := zeroWindowCall(t)
	warm := streamFrames(rc, 1)
	if len(warm) != 3 {
		t.Fatalf("the first call: %v", warm)
	}
	c := serverConn(t, f)
	before := sendWindow(c)

	rc.writeHeaders(3, true, request("POST", "/svc/Call", "content-type", "application/grpc")...)
	head := frameOf(rc, 3)
	if head != "HEADERS[:status=200 content-type=application/grpc] end=false" {
		t.Fatalf("with no window the first frame is %s, want the head alone", head)
	}
	rc.fr.WriteWindowUpdate(3, 3)
	if d := frameOf(rc, 3); d != `DATA "mes" end=false` {
		t.Fatalf("with 3 bytes of window: %s", d)
	}
	rc.fr.WriteWindowUpdate(3, 100)
	rest := streamFrames(rc, 3)
	want := []string{`DATA "sage" end=false`, "HEADERS[grpc-status=0 grpc-message=fine] end=true"}
	if fmt.Sprint(rest) != fmt.Sprint(want) {
		t.Fatalf("after more window: %v, want %v", rest, want)
	}
	if after := sendWindow(c); before-after != int64(len("message")) {
		t.Errorf("the connection's window went from %d to %d, want %d spent", before, after, len("message"))
	}
}

// TestWholeResponseTrailersAllForbidden checks that a whole response
// whose trailers carry only fields that may not be trailers ends with
// an empty DATA frame, and that a gRPC error in the trailers reaches the
// client as it came.
func TestWholeResponseTrailersAllForbidden(t *testing.T) {
	f := wholeBackend(t)
	rc := dialRaw(t, f.addr)
	rc.writeHeaders(1, true, request("POST", "/forbidden", "content-type", "application/grpc")...)
	got := streamFrames(rc, 1)
	want := []string{"HEADERS[:status=200 content-type=application/grpc] end=false", `DATA "message" end=false`, `DATA "" end=true`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("forbidden trailers: %v, want %v", got, want)
	}
	rc.writeHeaders(3, true, request("POST", "/error", "content-type", "application/grpc")...)
	got = streamFrames(rc, 3)
	if len(got) == 0 || got[len(got)-1] != "HEADERS[grpc-status=13 grpc-message=broken] end=true" {
		t.Fatalf("a gRPC error: %v", got)
	}
}

// TestWholeResponseClientResets checks that a client that resets a
// stream whose whole response waits for window gets nothing more of it,
// that the connection's window is whole again, and that the connection
// serves the next call.
func TestWholeResponseClientResets(t *testing.T) {
	// One scheduler thread: the backend's three frames are read before
	// the goroutine forwarding the call runs again, so the response is
	// whole when the door takes it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f, rc := zeroWindowCall(t)
	streamFrames(rc, 1)
	c := serverConn(t, f)
	before := sendWindow(c)

	rc.writeHeaders(3, true, request("POST", "/svc/Call", "content-type", "application/grpc")...)
	if head := frameOf(rc, 3); head != "HEADERS[:status=200 content-type=application/grpc] end=false" {
		t.Fatalf("with no window the first frame is %s, want the head alone", head)
	}
	rc.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	rc.fr.WriteWindowUpdate(3, 100) // too late: the stream is gone
	rc.writeHeaders(5, true, request("POST", "/svc/Call", "content-type", "application/grpc")...)
	rc.fr.WriteWindowUpdate(5, 100)
	got := streamFrames(rc, 5)
	if len(got) != 3 {
		t.Fatalf("the call after the reset: %v", got)
	}
	if after := sendWindow(c); before-after != int64(len("message")) {
		t.Errorf("the connection's window went from %d to %d, want only the last call's %d spent", before, after, len("message"))
	}
}

// TestWholeResponseWithoutContent checks responses that came whole but
// may carry no content, or carry more than their content-length: a HEAD
// request's and a 204 end with their head, whatever DATA the backend
// sent; a body past its content-length never reaches the client.
func TestWholeResponseWithoutContent(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		status, length := "200", "7"
		switch req.PseudoValue("path") {
		case "/no-content":
			status = "204"
		case "/short":
			length = "3"
		}
		hc.Write(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
				BlockFragment: hpackBlock(":status", status, "content-length", length)})
			fr.WriteData(id, true, []byte("message"))
		})
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr)
	rc.writeHeaders(1, true, request("HEAD", "/")...)
	if got := streamFrames(rc, 1); fmt.Sprint(got) != "[HEADERS[:status=200 content-length=7] end=true]" {
		t.Errorf("HEAD: %v", got)
	}
	rc.get(3, "/no-content")
	if got := streamFrames(rc, 3); fmt.Sprint(got) != "[HEADERS[:status=204] end=true]" {
		t.Errorf("204: %v", got)
	}
	rc.get(5, "/short")
	got := streamFrames(rc, 5)
	for _, fr := range got {
		if bytes.Contains([]byte(fr), []byte("DATA")) {
			t.Errorf("a body past its content-length: %v", got)
		}
	}
	if len(got) == 0 || got[len(got)-1][:10] != "RST_STREAM" {
		t.Errorf("a body past its content-length: %v, want the stream reset", got)
	}
}
