package h2

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
	"relay/internal/config"
)

// countingBackend answers every request 200 with no body and counts the
// bytes of the request heads it read.
func countingBackend(t *testing.T, upstream *atomic.Int64) *backend.Backend {
	t.Helper()
	return connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			head, err := rawHead(br)
			upstream.Add(int64(len(head)))
			if err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
}

// defaultLimits are the limits relay runs with by default.
func defaultLimits() Limits {
	lim := testLimits()
	lim.MaxHeaderBytes = config.DefaultMaxHeaderBytes
	return lim
}

// countWritten makes rc's frames go through a counter of the bytes sent.
func countWritten(rc *rawConn) *countingConn {
	cc := &countingConn{Conn: rc.nc}
	cc.n.Add(int64(len(http2.ClientPreface)) + 9) // the preface and SETTINGS, already sent
	dec := rc.fr.ReadMetaHeaders
	rc.fr = http2.NewFramer(cc, rc.nc)
	rc.fr.ReadMetaHeaders = dec
	rc.fr.MaxHeaderListSize = 1 << 20
	return cc
}

// batchResult is what came of a batch of requests.
type batchResult struct {
	ok     int                 // 200s
	goAway *http2.GoAwayFrame  // a GOAWAY that arrived, copied
	debug  string              // its debug data
	other  map[uint32]string   // streams that ended otherwise
	codes  map[uint32]struct{} // streams that ended, one way or another
}

// awaitBatch reads until every stream in ids ended, or a GOAWAY arrived
// and every stream it names as served ended.
func (rc *rawConn) awaitBatch(ids []uint32) batchResult {
	rc.t.Helper()
	res := batchResult{other: map[uint32]string{}, codes: map[uint32]struct{}{}}
	want := map[uint32]bool{}
	for _, id := range ids {
		want[id] = true
	}
	pending := func() bool {
		for id := range want {
			if res.goAway == nil || id <= res.goAway.LastStreamID {
				return true
			}
		}
		return false
	}
	for pending() {
		f := rc.next()
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			res.goAway = &http2.GoAwayFrame{LastStreamID: f.LastStreamID, ErrCode: f.ErrCode}
			res.debug = string(f.DebugData())
		case *http2.MetaHeadersFrame:
			if !want[id] {
				continue
			}
			if s := f.PseudoValue("status"); s == "200" {
				res.ok++
			} else {
				res.other[id] = "status " + s
			}
			if f.StreamEnded() {
				delete(want, id)
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				delete(want, id)
			}
		case *http2.RSTStreamFrame:
			if want[id] {
				res.other[id] = "reset " + f.ErrCode.String()
				delete(want, id)
			}
		}
	}
	return res
}

// HPACK amplification: a client indexes one 4 KB field and references it
// three times per request, so each 40-odd bytes it sends would become a
// 12 KB request head upstream. relay sends GOAWAY ENHANCE_YOUR_CALM once
// the connection's header blocks decode past its budget, answers the
// streams the GOAWAY names, and closes the connection; what reached the
// backend stays within the budget's bound of what the client sent.
func TestHPACKAmplificationIsBounded(t *testing.T) {
	var upstream atomic.Int64
	f := startFrontWith(t, testBodyTime, defaultLimits(), countingBackend(t, &upstream))
	rc := dialRaw(t, f.addr)
	sent := countWritten(rc)
	big := strings.Repeat("a", 4000) // with its name and 32 bytes, one 4 KB entry in the table
	const maxRequests = 2000
	id, requests, ok := uint32(1), 0, 0
	var g *http2.GoAwayFrame
	debug := ""
	for requests < maxRequests && g == nil {
		var ids []uint32
		for range 50 {
			rc.get(id, "/", "x-big", big, "x-big", big, "x-big", big)
			ids = append(ids, id)
			id += 2
			requests++
		}
		res := rc.awaitBatch(ids)
		ok += res.ok
		g, debug = res.goAway, res.debug
		if len(res.other) > 0 {
			t.Fatalf("streams ended without a 200: %v", res.other)
		}
	}
	if g == nil || g.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("%d requests sent, %d bytes received upstream for %d sent, and no GOAWAY ENHANCE_YOUR_CALM (%+v)",
			requests, upstream.Load(), sent.n.Load(), g)
	}
	if !strings.Contains(debug, "128 times the bytes sent") {
		t.Errorf("GOAWAY debug data %q, want it to say why", debug)
	}
	if served := int(g.LastStreamID+1) / 2; ok != served {
		t.Errorf("%d streams answered, want the %d the GOAWAY names as served", ok, served)
	}
	if err := rc.waitClosed(); err != nil {
		t.Fatalf("the connection stayed open after the GOAWAY: %v", err)
	}
	in, out := sent.n.Load(), upstream.Load()
	// The budget counts names and values; relay adds a request line,
	// Host, X-Forwarded-* and the separators to each request upstream.
	bound := decodeBurst + decodeRatio*in + 256*int64(ok)
	t.Logf("%d requests sent, %d answered; %d bytes sent, %d bytes upstream (%.0fx); bound %d",
		requests, ok, in, out, float64(out)/float64(in), bound)
	if out > bound {
		t.Errorf("%d bytes upstream for %d bytes sent: more than the budget allows (%d)", out, in, bound)
	}
}

// A browser's shape: a 3 KB cookie and its other fields indexed once and
// referenced on each of 1,000 requests, each for a new path, over one
// connection. Every request is served, with no GOAWAY.
func TestBrowserWithALargeCookieIsNotCut(t *testing.T) {
	var upstream atomic.Int64
	f := startFrontWith(t, testBodyTime, defaultLimits(), countingBackend(t, &upstream))
	rc := dialRaw(t, f.addr)
	sent := countWritten(rc)
	var cookie strings.Builder
	for i := 0; cookie.Len() < 3000; i++ {
		fmt.Fprintf(&cookie, "c%d=%s; ", i, strings.Repeat("v", 40))
	}
	extra := []string{
		"user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"accept", "text/css,*/*;q=0.1",
		"accept-encoding", "gzip, deflate, br, zstd",
		"accept-language", "en-GB,en;q=0.9",
		"cookie", strings.TrimSuffix(cookie.String(), "; "),
	}
	const requests = 1000
	id := uint32(1)
	for n := 0; n < requests; {
		var ids []uint32
		for range 50 {
			// Each path is new: sent literally and not indexed, so that
			// the cookie stays in the table and every request references
			// it, the most a browser's request decodes to for its size.
			rc.hbuf.Reset()
			path := fmt.Sprintf("/static/asset-%d.css", n)
			fields := append(request("GET", path), extra...)
			for i := 0; i < len(fields); i += 2 {
				rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1], Sensitive: fields[i] == ":path"})
			}
			if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			id += 2
			n++
		}
		res := rc.awaitBatch(ids)
		if res.goAway != nil || len(res.other) > 0 {
			t.Fatalf("after %d requests: GOAWAY %+v, streams not answered 200: %v", n, res.goAway, res.other)
		}
	}
	t.Logf("%d requests; %d bytes sent, %d bytes upstream (%.0fx)", requests, sent.n.Load(), upstream.Load(),
		float64(upstream.Load())/float64(sent.n.Load()))
}

// The header lists a connection's open streams hold are bounded: 100
// streams with 15 KB of fields each, held open by a backend that does not
// answer yet, are not all taken; those past the bound are refused with
// REFUSED_STREAM and served when sent again after the others end.
func TestHeaderMemoryPerConnectionIsBounded(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	b := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := rawHead(br); err != nil {
				return
			}
			arrived.Add(1)
			<-release
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	lim := defaultLimits()
	f := startFrontOpts(t, testBodyTime, lim, frontOptions{}, b)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	rc := dialRaw(t, f.addr)
	pad := func(id uint32) string { return strings.Repeat(fmt.Sprintf("%x", id%16), 15000) }
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var ids []uint32
	for id := uint32(1); id < 200; id += 2 {
		rc.get(id, "/", "x-pad", pad(id))
		ids = append(ids, id)
	}
	// relay acts on frames in order and writes a refusal as it reads
	// the stream: by the PING's answer, every refusal has arrived.
	refused := map[uint32]bool{}
	for _, h := range rc.sync() {
		if h.Type == http2.FrameGoAway {
			t.Fatal("GOAWAY")
		}
		if h.Type == http2.FrameRSTStream {
			refused[h.StreamID] = true
		}
	}
	if len(refused) == 0 {
		t.Fatalf("all %d streams of 15 KB of fields were taken at once", len(ids))
	}
	waitUntil(t, "the streams taken reaching the backend", func() bool { return int(arrived.Load())+len(refused) == len(ids) })
	c := serverConn(t, f)
	c.mu.Lock()
	held, limit := c.fb.held, c.fb.heldLimit
	c.mu.Unlock()
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	t.Logf("%d streams taken, %d refused; header lists held %d bytes (bound %d); heap in use grew %d KiB",
		arrived.Load(), len(refused), held, limit, (int64(during.HeapInuse)-int64(before.HeapInuse))>>10)
	if held > limit || held < limit/2 {
		t.Errorf("open streams hold %d bytes of header lists, want at most %d, and not far below", held, limit)
	}

	close(release)
	var open []uint32
	for _, id := range ids {
		if !refused[id] {
			open = append(open, id)
		}
	}
	for id, r := range rc.responses(open...) {
		if r.status != 200 {
			t.Fatalf("stream %d: status %d, reset %v (%v)", id, r.status, r.reset, r.code)
		}
	}
	var again []uint32
	id := uint32(201)
	for range refused {
		rc.get(id, "/", "x-pad", pad(id))
		again = append(again, id)
		id += 2
	}
	for id, r := range rc.responses(again...) {
		if r.status != 200 {
			t.Errorf("a refused stream sent again as %d: status %d, reset %v (%v)", id, r.status, r.reset, r.code)
		}
	}
}
