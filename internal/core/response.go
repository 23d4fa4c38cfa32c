package core

import (
	"io"
	"time"

	"relay/internal/h1"
	"relay/internal/h2up"
)

// ResponseBody is a backend's response body as a front door reads it to
// send it on. Every wait for the backend is bounded by the pool's response
// timeout.
type ResponseBody struct {
	u       *upstream
	door    Responder
	body    h1.Body
	kind    h1.BodyKind
	length  int64
	timeout time.Duration
	// drop names the fields the route removes from the response (a
	// comma-separated list), which stay out of its trailers too;
	// trailers holds the trailer lines that pass.
	drop     []byte
	trailers []byte
	// For a response on an HTTP/2 stream (streambody.go): the stream,
	// how long nothing may move on it, the call's deadline (zero: none),
	// whether its end was read, and its trailers as HTTP/1.1 lines.
	s     *h2up.Stream
	idle  time.Duration
	until time.Time
	end   bool
	raw   []byte
	pre   []byte // what Ready read
	// The response body phase: a filter a feature gave the body at the
	// response head (SetFilter), what it made of the bytes read last and
	// the client has yet to take, whether it was given the body's end,
	// and the buffer the backend's bytes are read into for it.
	filter  BodyFilter
	pending []byte
	fend    bool
	fbuf    []byte
	// rawKind and rawLength are how the backend frames a filtered body,
	// the head having the framing of what the filter makes.
	rawKind   h1.BodyKind
	rawLength int64
	// own is the fixed body of an answer relay makes itself (whole),
	// which a door takes as the Prefix.
	own []byte
}

func (r *ResponseBody) reset(u *upstream, resp *h1.Response, timeout time.Duration, door Responder, drop []byte) {
	kind, length := r.framing(resp)
	r.u, r.door, r.kind, r.length, r.timeout, r.drop, r.s = u, door, kind, length, timeout, drop, nil
	r.body.Reset(u.br, kind, length)
}

// framing is how the backend frames the body of resp: as resp says, or
// as it said before a filter was given the body.
func (r *ResponseBody) framing(resp *h1.Response) (h1.BodyKind, int64) {
	if r.filter != nil {
		return r.rawKind, r.rawLength
	}
	return resp.Body, resp.ContentLength
}

// empty makes r the body of an answer relay writes itself: none.
func (r *ResponseBody) empty() {
	r.endFilter()
	r.u, r.door, r.kind, r.length, r.drop, r.s, r.own = nil, nil, h1.BodyNone, 0, nil, nil, nil
	r.body.Reset(nil, h1.BodyNone, 0)
}

// whole makes r the body of an answer relay writes itself, p: a door
// gets it whole from Prefix, with nothing to Read after it.
func (r *ResponseBody) whole(p []byte) {
	r.empty()
	r.kind, r.length, r.own = h1.BodyLength, int64(len(p)), p
}

// Prefix returns the body bytes that arrived with the head and consumes
// them, so a front door can send them in the same write as the head. Only
// a body of known length has one; the bytes are valid until the next Read.
func (r *ResponseBody) Prefix() []byte {
	if r.s != nil || r.kind != h1.BodyLength || r.filter != nil {
		return nil
	}
	if r.u == nil { // relay's own body (whole)
		p := r.own
		r.own = nil
		return p
	}
	k := min(int64(r.u.br.Buffered()), r.length)
	p := r.u.br.Peek()[:k]
	r.u.br.Discard(int(k))
	r.body.Reset(r.u.br, h1.BodyLength, r.length-k)
	return p
}

// Read reads the next body bytes; io.EOF at the end. A wait that outlasts
// the client ends with an error, as the wait for the head does.
func (r *ResponseBody) Read(p []byte) (int, error) {
	if r.filter != nil {
		return r.readFiltered(p)
	}
	return r.readRaw(p)
}

// readRaw reads the next bytes the backend sent.
func (r *ResponseBody) readRaw(p []byte) (int, error) {
	if r.s != nil {
		return r.readStream(p)
	}
	r.u.wait(time.Now(), r.timeout, r.door)
	return r.body.Read(p)
}

// Done reports whether the body has been read to its end.
func (r *ResponseBody) Done() bool {
	if r.filter != nil {
		return r.fend && len(r.pending) == 0
	}
	return r.rawDone()
}

// rawDone reports whether the backend's body has been read to its end.
func (r *ResponseBody) rawDone() bool {
	if r.s != nil {
		return r.end
	}
	return r.body.Done()
}

// Trailers returns a chunked body's raw trailer lines after its end, less
// those of the fields the route removes.
func (r *ResponseBody) Trailers() []byte {
	if r.s != nil {
		return r.streamTrailers()
	}
	tr := r.body.Trailers()
	if len(tr) == 0 || len(r.drop) == 0 {
		return tr
	}
	r.trailers = h1.AppendPassingTrailers(r.trailers[:0], tr, r.drop)
	return r.trailers
}

// SetFilter gives the body of resp a filter (the response body phase):
// from now on a front door reads what f makes of the backend's bytes,
// and resp says its length is unknown (chunked, on HTTP/1.1). A feature
// calls it at the response head, having made the rest of the head fit
// what f makes (Content-Encoding, say); the core releases f once the
// door has sent the response, complete or not.
func (r *ResponseBody) SetFilter(f BodyFilter, resp *h1.Response) {
	r.endFilter()
	r.filter, r.pending, r.fend = f, nil, false
	r.rawKind, r.rawLength = resp.Body, resp.ContentLength
	resp.Body, resp.ContentLength = h1.BodyChunked, -1
}

// filterBytes bounds what the backend's bytes are read in for a filter.
const filterBytes = 16 << 10

// readFiltered reads through the body's filter: the backend's next bytes,
// as many as one read gives, go to the filter, and what it makes is
// handed out until it is taken, so that a streamed body leaves as it
// comes. The filter learns whether more of the body is there to read
// at once, so it flushes only before relay would wait.
func (r *ResponseBody) readFiltered(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.fend {
			return 0, io.EOF
		}
		if r.fbuf == nil {
			r.fbuf = make([]byte, filterBytes)
		}
		n, err := r.readRaw(r.fbuf)
		if err != nil && err != io.EOF {
			return 0, err
		}
		end := err == io.EOF || (n > 0 && r.rawDone())
		out, ferr := r.filter.Filter(r.fbuf[:n], end, !end && r.moreReady())
		if ferr != nil {
			return 0, ferr
		}
		r.pending, r.fend = out, end
	}
	k := copy(p, r.pending)
	r.pending = r.pending[k:]
	return k, nil
}

// moreReady reports whether more of the backend's body can be read
// without waiting: its bytes are in the connection's buffer or its
// socket, or they have come on the stream. Between chunks of a chunked
// body, framing alone does not count (h1.Body.Ready): a backend that
// paused after a chunk has sent the chunk's CRLF, and a filter that
// took it for more would not flush what the client waits for. A
// connection relay cannot look into (TLS to the backend) says no, so
// its filter flushes at every read.
func (r *ResponseBody) moreReady() bool {
	if r.s != nil {
		return r.s.Buffered() > 0
	}
	return r.body.Ready(r.u.conn)
}

// endFilter releases the body's filter, if any: the response is over,
// complete or not.
func (r *ResponseBody) endFilter() {
	if r.filter != nil {
		r.filter.Release()
		r.filter, r.pending, r.fend = nil, nil, false
	}
}
