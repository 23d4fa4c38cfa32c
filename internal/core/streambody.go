package core

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/h1"
	"relay/internal/h2up"
)

// streamBufs are the buffers request bodies are sent to HTTP/2 backends
// through.
var streamBufs = sync.Pool{New: func() any {
	b := make([]byte, 16<<10)
	return &b
}}

// pump sends a request body to an HTTP/2 backend on a goroutine of its
// own while the response is relayed: a bidirectional gRPC stream needs
// both at once.
type pump struct {
	ab     duplexBody
	s      *h2up.Stream
	done   chan struct{}
	client atomic.Bool // the body failed on the client's side
	// Set by the goroutine before done is closed.
	in  int64
	err error
}

func startPump(x *Exchange, s *h2up.Stream, inline []byte, hold int64, timeout time.Duration, ab duplexBody) *pump {
	pm := &pump{ab: ab, s: s, done: make(chan struct{})}
	go func() {
		defer close(pm.done)
		pm.in, pm.err = x.sendStream(s, inline, hold, timeout)
		if errors.Is(pm.err, errClientBody) {
			pm.client.Store(true)
		}
	}()
	return pm
}

// sending reports whether the body is still being sent.
func (pm *pump) sending() bool {
	if pm == nil {
		return false
	}
	select {
	case <-pm.done:
		return false
	default:
		return true
	}
}

// failedOnClient reports whether the body failed on the client's side.
func (pm *pump) failedOnClient() bool {
	if pm == nil || !pm.client.Load() {
		return false
	}
	<-pm.done
	return true
}

// finish ends the pump once the response is over: a read still waiting
// for the client is aborted, and so is a write waiting for the backend's
// window, which a backend that has answered may never open. It returns
// the body bytes sent; in when there was no pump.
func (pm *pump) finish(in int64) int64 {
	if pm == nil {
		return in
	}
	select {
	case <-pm.done:
	default:
		pm.ab.Abort()
		pm.s.AbortWrite()
		<-pm.done
		if errors.Is(pm.err, errClientBody) {
			// Stopped here, not failed on the client's side: another
			// attempt may read the rest of the body.
			pm.err = nil
		}
	}
	return pm.in
}

// resetStream makes r the body of a response on the HTTP/2 stream s.
// idle bounds how long nothing may move on the stream, either way;
// until, when not zero, is the call's deadline. A response of kind
// h1.BodyNone is done at once: nothing of the stream is read, whatever
// the backend sends.
func (r *ResponseBody) resetStream(s *h2up.Stream, kind h1.BodyKind, door Responder, idle time.Duration, until time.Time, drop []byte) {
	if r.filter != nil {
		kind = r.rawKind
	}
	r.u, r.s, r.door, r.idle, r.until, r.drop, r.end = nil, s, door, idle, until, drop, kind == h1.BodyNone
}

// OnStream reports whether the body comes on an HTTP/2 stream, after
// which trailers may come whatever the body's length.
func (r *ResponseBody) OnStream() bool { return r.s != nil }

// readyBytes bounds what Ready takes of a stream's body at once: a unary
// call's message, most often.
const readyBytes = 4 << 10

// Ready returns the body bytes that have come and consumes them, and
// whether the body ended with them (Trailers then has its trailers); a
// front door that frames every part of a body the same way (HTTP/2's
// DATA frames) sends them with the head, and a body that came whole
// leaves in one write, trailers and all. A body not on a stream gives
// its Prefix. The bytes are valid until the next Read.
func (r *ResponseBody) Ready() ([]byte, bool) {
	if r.filter != nil {
		// What has come goes through the filter as the door reads.
		return nil, r.Done()
	}
	if r.s == nil {
		return r.Prefix(), r.Done()
	}
	if r.end {
		return nil, true
	}
	if r.pre == nil {
		r.pre = make([]byte, readyBytes)
	}
	n, end := r.s.ReadNow(r.pre)
	r.end = end
	return r.pre[:n], end
}

// readStream reads the next body bytes from the stream. Every
// watchInterval of a wait it looks at whether the client is still there.
func (r *ResponseBody) readStream(p []byte) (int, error) {
	// The stream bounds only its waits: a backend that sends faster than
	// the client takes has bytes waiting for every read, and its call
	// would never reach its deadline. A call with one reads the clock.
	if !r.until.IsZero() && time.Until(r.until) <= 0 {
		return 0, errCallDeadline
	}
	for {
		limit := r.s.LastActive().Add(r.idle)
		if !r.until.IsZero() && r.until.Before(limit) {
			limit = r.until
		}
		// As in awaitHead: the clock is read only for a wait.
		r.s.SetReadLimit(limit, watchInterval)
		n, err := r.s.Read(p)
		if err == io.EOF {
			r.end = true
		}
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if time.Until(limit) <= 0 {
			if limit.Equal(r.until) {
				return 0, errCallDeadline
			}
			return 0, errStreamIdle
		}
		if r.door.Gone() {
			return 0, errClientGone
		}
	}
}

// streamTrailers returns the stream's trailers as HTTP/1.1 lines, less
// those of the fields the route removes.
func (r *ResponseBody) streamTrailers() []byte {
	tr := r.s.Trailers()
	if len(tr) == 0 {
		return nil
	}
	r.raw = r.raw[:0]
	for _, f := range tr {
		r.raw = append(r.raw, f.Name...)
		r.raw = append(r.raw, ": "...)
		r.raw = append(r.raw, f.Value...)
		r.raw = append(r.raw, "\r\n"...)
	}
	if len(r.drop) == 0 {
		return r.raw
	}
	r.trailers = h1.AppendPassingTrailers(r.trailers[:0], r.raw, r.drop)
	return r.trailers
}
