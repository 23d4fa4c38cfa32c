package h2

import (
	"bytes"
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/core"
)

// writeCounter counts the writes relay makes to a client's connection.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// hpackBlock encodes name, value pairs as a header block, with an encoder
// of its own, as h2test's hostile backend does.
func hpackBlock(fields ...string) []byte {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// TestWholeResponseLeavesInOneWrite checks that a response that came
// whole from an HTTP/2 backend, head, body and trailers in one write, as
// a unary gRPC call's does, reaches the client in one write too, and
// that one whose trailers are still to come goes out as it comes.
func TestWholeResponseLeavesInOneWrite(t *testing.T) {
	// One scheduler thread: the backend's three frames are read before
	// the goroutine forwarding the call runs again.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		if req.PseudoValue("path") == "/svc/Later" {
			hc.Head(id, false, ":status", "200", "content-type", "application/grpc")
			hc.Data(id, false, "message")
			return // the trailers never come: the call stays open
		}
		hc.Write(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
				BlockFragment: hpackBlock(":status", "200", "content-type", "application/grpc")})
			fr.WriteData(id, false, []byte("message"))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
				BlockFragment: hpackBlock("grpc-status", "0", "grpc-message", "fine")})
		})
	})
	var writes atomic.Int64
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
		wrap: func(nc net.Conn) net.Conn { return writeCounter{nc, &writes} },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr)
	// The connection's own frames first: relay's SETTINGS, the ack of the
	// client's.
	rc.get(1, "/warm")
	rc.response(1)

	for i, id := range []uint32{3, 5, 7} {
		before := writes.Load()
		rc.writeHeaders(id, true, request("POST", "/svc/Call", "content-type", "application/grpc")...)
		r := rc.response(id)
		if r.status != 200 || string(r.body) != "message" || len(r.trailers) != 2 || r.trailers[0].Value != "0" {
			t.Fatalf("call %d: status %d, body %q, trailers %v", i, r.status, r.body, r.trailers)
		}
		if n := writes.Load() - before; n != 1 {
			t.Errorf("call %d: the whole response took %d writes, want 1", i, n)
		}
	}

	// A response whose end has not come: its head and body still reach
	// the client.
	rc.writeHeaders(9, true, request("POST", "/svc/Later", "content-type", "application/grpc")...)
	var got []string
	for len(got) < 2 {
		switch f := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 9 {
				got = append(got, "head "+f.PseudoValue("status"))
			}
		case *http2.DataFrame:
			if f.StreamID == 9 {
				got = append(got, "data "+string(f.Data()))
			}
		}
	}
	if got[0] != "head 200" || got[1] != "data message" {
		t.Fatalf("an open response reached the client as %v", got)
	}
}
