package h1

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// wire is a connection's bytes as they arrive: Read takes what has come
// and, with nothing come, fails as a read that would wait, which Ready
// must never make.
type wire struct{ arrived string }

var errWouldWait = errors.New("read with nothing arrived: it would wait")

func (w *wire) Read(p []byte) (int, error) {
	if w.arrived == "" {
		return 0, errWouldWait
	}
	n := copy(p, w.arrived)
	w.arrived = w.arrived[n:]
	return n, nil
}

// Readable is the socket's non-blocking peek.
func (w *wire) Readable() bool { return w.arrived != "" }

// Ready says whether the next Read gives body bytes (or the end) without
// waiting: framing alone between chunks is not more of the body.
func TestBodyReady(t *testing.T) {
	tests := []struct {
		name string
		kind BodyKind
		// first arrives and is read, a 4-byte Read at a time, until
		// read bytes of data came; then then arrives.
		first string
		read  int
		then  string
		want  bool
		// rest is what Read gives after Ready, then arrives too.
		rest string
	}{
		{name: "length: buffered", kind: BodyLength, first: "abcdefgh", read: 4, want: true, rest: "efgh"},
		{name: "length: in the socket", kind: BodyLength, first: "abcd", read: 4, then: "efgh", want: true},
		{name: "length: nothing", kind: BodyLength, first: "abcd", read: 4, want: false, rest: "efgh"},
		{name: "chunk data left in the socket", kind: BodyChunked, first: "8\r\nabcd", read: 4, then: "efgh", want: true, rest: "\r\n0\r\n\r\n"},
		{name: "chunk's CRLF only", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n", want: false, rest: "4\r\nefgh\r\n0\r\n\r\n"},
		{name: "CRLF and a size line", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n4\r\n", want: false, rest: "efgh\r\n0\r\n\r\n"},
		{name: "part of a size line", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n4", want: false, rest: "\r\nefgh\r\n0\r\n\r\n"},
		{name: "CRLF, size and data", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n4\r\ne", want: true, rest: "fgh\r\n0\r\n\r\n"},
		{name: "all of the next chunk", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n4;x=y\r\nefgh\r\n", want: true, rest: "0\r\n\r\n"},
		{name: "the end", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n0\r\n\r\n", want: true},
		{name: "the end with trailers", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n0\r\nX-A: b\r\n\r\n", want: true},
		{name: "the last chunk, trailers to come", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\n0\r\nX-A: b\r\n", want: false, rest: "\r\n"},
		{name: "bad framing is there at once", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "xx", want: true},
		{name: "bad size", kind: BodyChunked, first: "4\r\nabcd", read: 4, then: "\r\nzz\r\n", want: true},
		{name: "CRLF consumed with the data", kind: BodyChunked, first: "4\r\nabcd\r\n", read: 4, then: "", want: false, rest: "4\r\nefgh\r\n0\r\n\r\n"},
		{name: "before the first chunk", kind: BodyChunked, first: "", read: 0, then: "4\r\n", want: false, rest: "abcd\r\n0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &wire{arrived: tt.first}
			r := NewReader(w, 4, 64)
			var b Body
			b.Reset(r, tt.kind, 8)
			var data []byte
			buf := make([]byte, 4)
			for len(data) < tt.read {
				n, err := b.Read(buf)
				if err != nil {
					t.Fatalf("reading the first bytes: %v", err)
				}
				data = append(data, buf[:n]...)
			}
			w.arrived += tt.then
			if got := b.Ready(w); got != tt.want {
				t.Fatalf("Ready = %v, want %v (buffered %q, in the socket %q)", got, tt.want, r.Peek(), w.arrived)
			}
			// What Ready read into the buffer is still the body's.
			w.arrived += tt.rest
			for {
				n, err := b.Read(buf)
				data = append(data, buf[:n]...)
				if err != nil {
					if err != io.EOF && !strings.HasPrefix(tt.name, "bad") {
						t.Fatalf("reading the rest: %v", err)
					}
					break
				}
			}
			if !strings.HasPrefix(tt.name, "bad") && string(data) != "abcdefgh"[:len(data)] {
				t.Fatalf("body %q", data)
			}
		})
	}
}
