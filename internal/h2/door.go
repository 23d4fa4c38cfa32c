package h2

import (
	"errors"
	"net"
	"strconv"

	"relay/internal/core"
	"relay/internal/h1"
)

// A stream is the core's Responder for its request: everything the core
// sends the client becomes the stream's HEADERS and DATA frames.

var errStalled = errors.New("h2: the client granted no window for the idle timeout")

// Continue sends 100 Continue: the client may now send its body.
func (st *stream) Continue() error {
	if st.sent100 {
		return nil
	}
	st.sent100 = true
	return st.c.respond(st, 100, nil, -1, nil, false)
}

// Interim passes on an informational response (103 Early Hints and the
// like). 101 has no place in HTTP/2 and is dropped.
func (st *stream) Interim(resp *h1.Response) error {
	if resp.Status == 101 {
		return nil
	}
	return st.c.respond(st, resp.Status, resp.Fields, -1, nil, false)
}

// Respond sends the backend's response: its HEADERS, then its body as
// DATA frames as the bytes arrive, so streamed responses stream. A body
// that arrived whole with the head goes out with it in one write.
func (st *stream) Respond(resp *h1.Response, rb *core.ResponseBody) (n int64, rerr, werr error) {
	c := st.c
	length := int64(-1)
	if resp.ContentLength >= 0 && resp.Status >= 200 && resp.Status != 204 && resp.Status != 304 {
		length = resp.ContentLength
	}
	if st.head || resp.Body == h1.BodyNone {
		return 0, nil, c.respond(st, resp.Status, resp.Fields, length, nil, true)
	}
	// DATA frames carry any part of a body alike: whatever has come of
	// it goes with the head.
	p, done := rb.Ready()
	if !done && resp.Body == h1.BodyLength && resp.ContentLength <= readAheadBytes && c.short(st, resp.ContentLength) {
		// The client will not take the body at once: read it whole, so
		// that the backend connection is not held while it waits.
		body, ok, err := st.readAhead(p, rb, resp.ContentLength)
		if err != nil {
			return int64(len(p)), err, nil // the stream is reset (finish)
		}
		if ok {
			p, done = body, true
			if rb.OnStream() {
				// The length's last byte does not end a stream: its
				// trailers may be still to come, and the stream has
				// ended only once the backend says so. No byte can
				// follow the length (h2up resets such a stream).
				more, end := rb.Ready()
				done = end && len(more) == 0
			}
		}
	}
	var tr []byte
	if done {
		if tr = rb.Trailers(); len(tr) == 0 {
			tr = nil
		}
	}
	if resp.Body == h1.BodyChunked && (tr != nil || !done) {
		// The head's bytes are in the backend connection's read buffer,
		// which the body's bytes overwrite: what the trailers need of it
		// is copied now.
		st.hops = h1.AppendConnection(st.hops[:0], resp.Fields)
	}
	if err := c.respondWhole(st, resp.Status, resp.Fields, length, p, done, tr, st.hops); err != nil || done {
		return int64(len(p)), nil, err
	}
	n = int64(len(p))
	dw := &st.dw
	*dw = dataWriter{st: st, left: -1}
	if resp.Body == h1.BodyLength && !rb.OnStream() {
		// The last byte of the length ends the stream; a body on an
		// HTTP/2 stream may have trailers after it, and ends with them.
		dw.left = resp.ContentLength - n
	}
	k, rerr, werr := h1.CopyBody(dw, rb, false, nil)
	n += k
	if rerr != nil || werr != nil {
		return n, rerr, werr // the stream is reset (finish)
	}
	if !st.ended {
		if tr := rb.Trailers(); len(tr) > 0 {
			// A chunked body's trailer section ends the stream.
			werr = c.endWithTrailers(st, tr, st.hops)
		} else {
			werr = c.writeData(st, nil, true)
		}
	}
	return n, nil, werr
}

// dataWriter writes a response body's bytes as DATA frames, ending the
// stream with the last bytes of a body of known length.
type dataWriter struct {
	st   *stream
	left int64 // body bytes still to come; -1: unknown
}

func (w *dataWriter) Write(p []byte) (int, error) {
	end := w.left == int64(len(p))
	if w.left >= 0 {
		w.left -= int64(len(p))
	}
	if err := w.st.c.writeData(w.st, p, end); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Tunnel is never asked for: an HTTP/2 request is never an upgrade.
func (st *stream) Tunnel(*h1.Response, net.Conn, []byte) int64 {
	st.Error(502, "the backend switched protocols, which HTTP/2 cannot carry")
	return 0
}

// Gone reports whether the client reset the stream or the connection
// ended.
func (st *stream) Gone() bool { return st.gone.Load() }

// errorFields are the fields of relay's own error responses.
var (
	errorFields = []h1.Field{
		{Name: []byte("content-type"), Value: []byte("text/plain; charset=utf-8")},
	}
	errorFields503 = []h1.Field{
		{Name: []byte("content-type"), Value: []byte("text/plain; charset=utf-8")},
		{Name: []byte("retry-after"), Value: []byte(core.RetryAfter)},
	}
	requestIDName = []byte("x-request-id")
)

// Error answers with relay's own error response, worded as the HTTP/1.1
// door words it.
func (st *stream) Error(status int, msg string) (int64, error) {
	fields := errorFields
	if status == 503 {
		fields = errorFields503
	}
	if id := st.x.RequestID(); id != nil {
		fields = append(fields[:len(fields):len(fields)], h1.Field{Name: requestIDName, Value: id})
	}
	text := core.AppendErrorBody(nil, status, msg)
	if st.head {
		return 0, st.c.respond(st, status, fields, int64(len(text)), nil, true)
	}
	return int64(len(text)), st.c.respond(st, status, fields, int64(len(text)), text, true)
}

// statuses are the :status values, made once.
var statuses = func() (s [600]string) {
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusText(code int) string {
	if code >= 100 && code < len(statuses) {
		return statuses[code]
	}
	return strconv.Itoa(code)
}
