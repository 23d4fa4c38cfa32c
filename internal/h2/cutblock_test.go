package h2

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A request whose header block comes a few bytes a frame, every field
// and length cut, is read whole: the backend sees its long field as sent,
// and the next request on the connection, which refers to the first's
// fields by index and repeats its strings, is read as well.
func TestHeaderBlockCutAcrossFramesIsReadWhole(t *testing.T) {
	long := strings.Repeat("0123456789", 20)
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long-Seen", r.Header.Get("X-Long"))
		w.Header().Set("X-Path-Seen", r.URL.Path)
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	for id := uint32(1); id <= 3; id += 2 {
		rc.hbuf.Reset()
		for _, hf := range requestFields("GET", "/cut") {
			rc.enc.WriteField(hf)
		}
		rc.enc.WriteField(hpack.HeaderField{Name: "x-long", Value: long})
		rc.enc.WriteField(hpack.HeaderField{Name: "x-plain", Value: long, Sensitive: true})
		block := rc.hbuf.Bytes()
		// Three bytes a frame for the first request, seven for the second, so
		// that frames also end one field and begin the next.
		frag := 2*int(id) + 1
		err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:frag], EndStream: true})
		for i := frag; err == nil && i < len(block); i += frag {
			end := min(i+frag, len(block))
			err = rc.fr.WriteContinuation(id, end == len(block), block[i:end])
		}
		if err != nil {
			t.Fatal(err)
		}
		resp := rc.response(id)
		if resp.status != 200 || strings.Join(resp.get("x-long-seen"), ",") != long || strings.Join(resp.get("x-path-seen"), ",") != "/cut" {
			t.Fatalf("stream %d: %d, x-long-seen %.20q", id, resp.status, resp.get("x-long-seen"))
		}
	}
}
