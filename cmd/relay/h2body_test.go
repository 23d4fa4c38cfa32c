package main

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/testcert"
)

// postBlock is an HPACK-encoded POST request head announcing a body of
// length bytes (none announced when length < 0).
func postBlock(path string, length int) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "a.example"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if length >= 0 {
		enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(length)})
	}
	return buf.Bytes()
}

// HTTP/2 streams whose request bodies stall are answered 408 within
// client_body_timeout, and the backend requests they opened end: one
// connection's streams cannot hold backend requests open for as long as
// the client likes. A GET whose head never ends its stream is bounded the
// same way.
func TestHTTP2StalledRequestBodiesTimeOut(t *testing.T) {
	ca := testcert.NewCA(t)
	var open, peak atomic.Int64
	be := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Forwarded-For") == "" { // a health check
				h.ServeHTTP(w, r)
				return
			}
			n := open.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			defer open.Add(-1)
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "whole body")
		})
	})
	const bodyTimeout = time.Second
	h := dialH2Relay(t, ca, "client_body_timeout: 1s\nclient_body_min_rate: 1000000\nidle_timeout: 30s\n", be.url)

	// 20 uploads announcing 10 MB that send 16 KiB and stall, and a GET
	// whose HEADERS leave the stream open.
	const uploads = 20
	chunk := make([]byte, 16<<10)
	streams := map[uint32]bool{}
	id := uint32(1)
	for ; id < 2*uploads; id += 2 {
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: postBlock("/upload", 10_000_000), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := h.fr.WriteData(id, false, chunk); err != nil {
			t.Fatal(err)
		}
		streams[id] = true
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock("/get"), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	streams[id] = true
	sent := time.Now()

	// Every stream must be answered (or reset) within the body timeout
	// and some slack; the connection stays up for the answers.
	statuses := map[uint32]string{}
	dec := hpack.NewDecoder(4096, nil)
	h.c.SetReadDeadline(sent.Add(bodyTimeout + 10*time.Second))
	for len(streams) > 0 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v, %d streams still open (%v): %v", time.Since(sent).Round(time.Millisecond), len(streams), streams, err)
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, hf := range fields {
				if hf.Name == ":status" {
					statuses[f.StreamID] = hf.Value
				}
			}
			if f.StreamEnded() {
				delete(streams, f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				delete(streams, f.StreamID)
			}
		case *http2.RSTStreamFrame:
			delete(streams, f.StreamID)
		}
	}
	took := time.Since(sent)
	t.Logf("all %d streams ended after %v; statuses %v; backend peak %d open", uploads+1, took.Round(time.Millisecond), statuses, peak.Load())
	for sid, st := range statuses {
		if st != "408" {
			t.Errorf("stream %d answered %s, want 408", sid, st)
		}
	}
	if len(statuses) != uploads+1 {
		t.Errorf("%d of %d streams got a status", len(statuses), uploads+1)
	}
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n > 0 {
		t.Errorf("the backend still holds %d requests of stalled streams", n)
	}
	if peak.Load() == 0 {
		t.Error("no upload reached the backend: the test proves nothing")
	}
}
