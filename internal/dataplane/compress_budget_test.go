package dataplane

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"relay/internal/compress"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// heldStreams is an h2c connection to relay whose client grants no
// flow-control window: relay sends each stream's head and then waits,
// holding whatever the response holds, until the connection closes.
type heldStreams struct {
	t    testing.TB
	nc   net.Conn
	fr   *http2.Framer
	next uint32
}

// holdStreams opens the connection; its SETTINGS make every stream's
// window zero.
func holdStreams(t testing.TB, addr string) *heldStreams {
	t.Helper()
	nc := dialTCP(t, addr)
	t.Cleanup(func() { nc.Close() })
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	return &heldStreams{t: t, nc: nc, fr: fr, next: 1}
}

// open sends n GET requests for path with Accept-Encoding ae and returns
// the head of each response, in the order they came; a stream reset
// instead fails the test.
func (h *heldStreams) open(n int, path, ae string) []http.Header {
	h.t.Helper()
	for range n {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", path}, {":authority", "app.example"}, {"accept-encoding", ae}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.next, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			h.t.Fatal(err)
		}
		h.next += 2
	}
	var heads []http.Header
	for len(heads) < n {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.t.Fatalf("reading the heads (%d of %d so far): %v", len(heads), n, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = h.fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			hd := http.Header{}
			for _, hf := range f.Fields {
				hd.Add(hf.Name, hf.Value)
			}
			heads = append(heads, hd)
		case *http2.DataFrame:
			h.t.Fatalf("stream %d: DATA with a window of zero", f.StreamID)
		case *http2.RSTStreamFrame:
			h.t.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
		case *http2.GoAwayFrame:
			h.t.Fatalf("GOAWAY %v", f.ErrCode)
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return heads
}

// waitEncodersIdle waits until no encoder of the process is in use: every
// response relay compressed has given its encoder back.
func waitEncodersIdle(t testing.TB) {
	t.Helper()
	waitFor(t, "every encoder released", func() bool { return compress.Encoders().InUse == 0 })
}

// Streams a client never reads hold relay's encoders, and so its memory,
// only up to the process's encoder budget: past it a response goes as the
// backend sent it, whole and with the backend's own length and tag, to
// that client and every other, until the held streams end.
func TestCompressionEncoderBudget(t *testing.T) {
	r := startCompressRelay(t)
	waitEncodersIdle(t)
	before := compress.Encoders()

	hold := holdStreams(t, r.addr)
	if h := hold.open(1, "/html", "gzip"); h[0].Get("content-encoding") != "gzip" {
		t.Fatalf("the first held stream is not compressed: %v", h[0])
	}
	u := compress.Encoders()
	if u.InUse != 1 || u.Bytes <= 0 {
		t.Fatalf("one stream held: %+v", u)
	}
	cost := u.Bytes
	// Room for four encoders in all; eight more streams want one each.
	old := compress.SetEncoderMemory(4 * cost)
	t.Cleanup(func() { compress.SetEncoderMemory(old) })
	coded := 1
	for _, h := range hold.open(8, "/html", "gzip") {
		switch h.Get("content-encoding") {
		case "gzip":
			coded++
			if h.Get("content-length") != "" || h.Get("etag") != `"v1-gzip"` {
				t.Errorf("a compressed head: %v", h)
			}
		case "":
			if h.Get("content-length") != fmt.Sprint(len(htmlDoc)) || h.Get("etag") != `"v1"` || !strings.EqualFold(h.Get("vary"), "Accept-Encoding") {
				t.Errorf("an uncompressed head past the budget: %v; want the backend's length and tag, and Vary", h)
			}
		default:
			t.Errorf("Content-Encoding %q", h.Get("content-encoding"))
		}
	}
	if u := compress.Encoders(); coded != 4 || u.InUse != 4 || u.Bytes != 4*cost {
		t.Fatalf("%d of 9 held streams compressed, %+v in use; want 4, within %d bytes", coded, u, 4*cost)
	}

	// Another client meanwhile gets the page whole, as it is.
	c := clients(r)["http1"]
	resp, body := cget(t, c, r, "GET", "/html", "gzip")
	if resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, htmlDoc) || resp.ContentLength != int64(len(htmlDoc)) {
		t.Fatalf("with the budget spent: Content-Encoding %q, %d bytes of %d, length %d; want the page as it is",
			resp.Header.Get("Content-Encoding"), len(body), len(htmlDoc), resp.ContentLength)
	}
	after := compress.Encoders()
	if got := after.OverBudget - before.OverBudget; got != 6 {
		t.Errorf("%d responses counted over budget, want 6", got)
	}
	if got := r.proxy.Stats().Compress; got.OverBudget != after.OverBudget || got.EncodersInUse != 4 {
		t.Errorf("relay's stats: %+v; want %d over budget, 4 in use", got, after.OverBudget)
	}

	// Once the held streams end, compression comes back.
	hold.nc.Close()
	waitEncodersIdle(t)
	resp, body = cget(t, c, r, "GET", "/html", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(decode(t, "gzip", body), htmlDoc) {
		t.Fatalf("after the held streams ended: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	waitEncodersIdle(t)
}

// compress_memory_mb sets the process's encoder budget at start and on a
// reload, and a reload that drops it restores compress's default.
func TestCompressMemoryKey(t *testing.T) {
	def := compress.SetEncoderMemory(0)
	t.Cleanup(func() { compress.SetEncoderMemory(def) })
	be := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	file := "backends: [" + be + "]\ncompress: true\n"
	r := startRelay(t, file+"compress_memory_mb: 3\n", Options{})
	if got := compress.EncoderMemory(); got != 3<<20 {
		t.Fatalf("compress_memory_mb: 3 gave a budget of %d bytes, want %d", got, 3<<20)
	}
	if err := r.plane.Reconfigure(parse(t, file+"compress_memory_mb: 5\n")); err != nil {
		t.Fatal(err)
	}
	if got := compress.EncoderMemory(); got != 5<<20 {
		t.Fatalf("reloaded with compress_memory_mb: 5, the budget is %d bytes, want %d", got, 5<<20)
	}
	if err := r.plane.Reconfigure(parse(t, file)); err != nil {
		t.Fatal(err)
	}
	if got := compress.EncoderMemory(); got != def {
		t.Fatalf("reloaded without compress_memory_mb, the budget is %d bytes, want the default %d", got, def)
	}
}
