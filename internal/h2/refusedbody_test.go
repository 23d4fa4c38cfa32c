package h2

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// A stream the backend refuses while the client is still sending its
// body, the part sent so far fitting in body_buffer_bytes, goes to
// another backend with the whole body: the part kept, then the rest as
// the client sends it. Stopping the first attempt's sender must not end
// the client's body for the next.
func TestRefusedWhileTheClientSendsIsRetriedWhole(t *testing.T) {
	var refusedOnce atomic.Bool
	refused, retried := make(chan struct{}), make(chan struct{})
	var heads atomic.Int64
	var mu sync.Mutex
	got := map[*hostileConn]map[uint32]int{}
	toRefuse := map[*hostileConn]uint32{}
	answer := func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		mu.Lock()
		defer mu.Unlock()
		if got[hc] == nil {
			got[hc] = map[uint32]int{}
		}
		got[hc][req.StreamID] = 0
		if heads.Add(1) == 2 {
			close(retried)
		}
		if refusedOnce.CompareAndSwap(false, true) {
			toRefuse[hc] = req.StreamID
		}
	}
	data := func(hc *hostileConn, f *http2.DataFrame) {
		mu.Lock()
		id := f.StreamID
		if toRefuse[hc] == id {
			delete(toRefuse, hc)
			mu.Unlock()
			hc.Write(func(fr *http2.Framer) { fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
			close(refused)
			return
		}
		got[hc][id] += len(f.Data())
		n := got[hc][id]
		mu.Unlock()
		if f.StreamEnded() {
			hc.Head(id, false, ":status", "200")
			hc.Data(id, true, strconv.Itoa(n))
		}
	}
	b1 := startHostileBackendData(t, answer, data)
	b2 := startHostileBackendData(t, answer, data)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
	}, core: func(c *core.Config) { c.HoldBodyBytes = 64 << 10 }}, backendAt(t, b1.URL), backendAt(t, b2.URL))
	client := h2Client(t)

	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(strings.Repeat("a", 100)))
		<-refused
		// The rest only once the call is at the next backend: relay
		// meanwhile waits for it, reading the client's body.
		select {
		case <-retried:
		case <-time.After(2 * time.Second):
		}
		pw.Write([]byte(strings.Repeat("b", 100)))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", f.url+"/upload", pr)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "200" {
		t.Fatalf("%d %q %v, want 200 and the backend's count of the whole body, 200 bytes", resp.StatusCode, body, err)
	}
}
