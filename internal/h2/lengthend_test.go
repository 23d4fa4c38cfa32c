package h2

import (
	"fmt"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// TestLengthBodyEndsOnStream checks how a client's stream ends after an
// HTTP/2 backend's body of declared length now that its last byte does
// not end it: END_STREAM on the last DATA, a length of 0 with trailers,
// and HEAD, each with the head sent before the rest came.
func TestLengthBodyEndsOnStream(t *testing.T) {
	gates := map[string]chan struct{}{"/end": make(chan struct{}), "/zero": make(chan struct{}), "/head": make(chan struct{})}
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		switch p := req.PseudoValue("path"); p {
		case "/end":
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Data(id, false, "hel")
			<-gates[p]
			hc.Data(id, true, "lo")
		case "/zero":
			hc.Head(id, false, ":status", "200", "content-length", "0")
			<-gates[p]
			hc.Head(id, true, "grpc-status", "0")
		case "/head":
			hc.Head(id, false, ":status", "200", "content-length", "5")
			<-gates[p]
			hc.Head(id, true, "grpc-status", "0")
		}
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr)
	// before is how many frames relay sends before the backend sends
	// the rest: the gate opens only once the client has them, or "hel"
	// and "lo" could reach relay together and leave as one DATA frame.
	cases := []struct {
		id           uint32
		method, path string
		before       int
		want         []string
	}{
		{1, "GET", "/end", 2, []string{"HEADERS[:status=200 content-length=5] end=false", `DATA "hel" end=false`, `DATA "lo" end=false`, `DATA "" end=true`}},
		{3, "GET", "/zero", 1, []string{"HEADERS[:status=200 content-length=0] end=false", "HEADERS[grpc-status=0] end=true"}},
		{5, "HEAD", "/head", 1, []string{"HEADERS[:status=200 content-length=5] end=true"}},
	}
	for _, tc := range cases {
		rc.writeHeaders(tc.id, true, request(tc.method, tc.path)...)
		var got []string
		for range tc.before {
			got = append(got, frameOf(rc, tc.id))
		}
		close(gates[tc.path])
		if len(tc.want) > tc.before {
			got = append(got, streamFrames(rc, tc.id)...)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
