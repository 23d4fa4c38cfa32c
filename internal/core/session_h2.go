package core

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/net/http2/hpack"

	"relay/internal/h1"
	"relay/internal/h2up"
)

// A request to an HTTP/2 backend (protocol h2 or h2c) is one stream: the
// head as HEADERS, the body as DATA while the response comes, trailers
// both ways. It takes the same steps as one over HTTP/1.1 (pick, wait,
// attempt; the breaker's judgement; the retry rules), and differs in
// three ways:
//
//   - The request body and the response flow at once. A body the front
//     door can be read from while it answers (an HTTP/2 client's: a
//     duplexBody) and that is still arriving is sent by a goroutine of
//     its own, so a bidirectional gRPC stream works. One already whole
//     in memory (a unary call's message) is sent at once, with the head;
//     an HTTP/1.1 client's body is sent first, as on the HTTP/1.1 path.
//   - A stream the backend did not process (REFUSED_STREAM, or above its
//     GOAWAY's last stream id) may go to another backend whatever the
//     method, as a refused connection may: the body bytes sent are kept
//     for that while they fit in HoldBodyBytes.
//   - Waits are bounded by what moves. The response head must come within
//     response_timeout of the request's end; while the request body is
//     still being sent, and after the head, the stream ends only when
//     nothing has moved either way for StreamIdleTimeout, or at a gRPC
//     call's deadline.

// errStreamIdle ends a stream on which nothing moved for the idle timeout.
var errStreamIdle = errors.New("nothing moved on the stream for the idle timeout")

// errCallDeadline ends a gRPC call at its deadline (grpc-timeout).
var errCallDeadline = errors.New("the call's deadline (grpc-timeout) passed")

// duplexBody is a request body the front door can be read from while it
// answers (an HTTP/2 client's). Abort ends a Read waiting for the
// client, the attempt being over, and Resume lets the next attempt read
// on; Complete reports that the whole body is in memory, so reading it
// will not wait.
type duplexBody interface {
	Abort()
	Resume()
	Complete() bool
}

// h2Session carries an attempt as a stream over an HTTP/2 connection to
// the backend (h2conns.go): the head as HEADERS, the body as DATA with
// it or while the response comes, the response's body and trailers read
// from the stream (streambody.go).
type h2Session struct {
	p     *Pool
	cs    *conns
	proto Protocol
	s     *h2up.Stream
	pm    *pump // the body's sender while the response comes; nil: none
	// opens counts the streams the attempt took; built says x.fields
	// holds the request's HTTP/2 head, and inline the body bytes
	// prepare put behind it.
	opens  int
	built  bool
	inline []byte
}

// upgrade: HTTP/2 has no protocol upgrade (RFC 9113 8.6).
func (h *h2Session) upgrade() string {
	return "a protocol upgrade cannot be carried to an HTTP/2 backend"
}

// open takes a stream on a pooled connection with room, or on a new one.
func (h *h2Session) open(x *Exchange, now time.Time) error {
	h.opens++
	s, fresh, err := h.cs.openStream(h.proto)
	if x.timed {
		x.connect = 0
		if fresh {
			x.connect = time.Since(now)
		}
	}
	if err != nil {
		return err
	}
	h.s, h.pm = s, nil
	return nil
}

// maxReopens bounds how many times one attempt takes a stream again
// because the backend lowered its stream limit meanwhile.
const maxReopens = 3

// send writes the head as HEADERS and sends the body: a body still
// arriving from an HTTP/2 client is sent while the response comes; one
// whole in memory (a unary call's message, a held body) goes out with
// the head in one write; an HTTP/1.1 client's is sent first, as on the
// HTTP/1.1 path.
func (h *h2Session) send(x *Exchange) (in int64, sent time.Time, err error) {
	if !h.built {
		scheme := "http"
		if h.proto == H2 {
			scheme = "https"
		}
		h.inline, h.built = x.streamHead(scheme), true
	}
	s, inline, cfg := h.s, h.inline, h.p.cfg()
	end := len(inline) == 0 && len(x.sent) == 0 && x.bodySent()
	db := x.duplex()
	if db != nil {
		// An attempt before this one may have stopped reading it.
		db.Resume()
	}
	inMemory := x.bodySent() || (db != nil && db.Complete())
	duplex := !end && db != nil && !inMemory
	if inMemory {
		s.Hold()
	}
	s.SetWriteTimeout(cfg.ResponseTimeout)
	if err := s.WriteHead(x.fields, end); err != nil {
		s.Release()
		return 0, sent, err
	}
	if x.timed {
		sent = time.Now()
	}
	hold := h.p.core.cfg.HoldBodyBytes
	switch {
	case end:
	case duplex:
		h.pm = startPump(x, s, inline, hold, cfg.ResponseTimeout, db)
	default:
		in, err = x.sendStream(s, inline, hold, cfg.ResponseTimeout)
		s.Release()
		if errors.Is(err, errClientBody) {
			return in, sent, err
		}
		// A write the backend refused: reading reports why.
	}
	s.Release()
	return in, sent, nil
}

// readHead waits for the next response head and fills resp from it.
func (h *h2Session) readHead(x *Exchange, resp *h1.Response) error {
	head, err := h.awaitHead(x)
	if err != nil {
		return err
	}
	x.streamResponse(resp, &head)
	return nil
}

// awaitHead waits for the next response head. The wait is bounded by
// response_timeout from the request's end, by the idle timeout while the
// request body is still being sent, and by the call's deadline; every watchInterval
// it looks at whether the client is still there, and whether the body
// sender failed on the client's side.
func (h *h2Session) awaitHead(x *Exchange) (h2up.Head, error) {
	s, pm := h.s, h.pm
	for {
		timeout := h.p.cfg().ResponseTimeout
		if pm.sending() {
			// The backend may wait for more of the request before it
			// answers (a bidirectional call): while the body is open
			// the wait ends only when nothing moves.
			timeout = h.p.core.streamIdle()
		}
		limit := s.LastActive().Add(timeout)
		if !x.deadline.IsZero() && x.deadline.Before(limit) {
			limit = x.deadline
		}
		// The stream reads the clock only if it must wait; the clock is
		// read here only when a wait ran out.
		s.SetReadLimit(limit, watchInterval)
		hd, err := s.ReadHead()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return hd, err
		}
		// LastActive and the deadline carry monotonic clock readings:
		// whether the limit passed is read from that clock alone.
		if time.Until(limit) <= 0 {
			if limit.Equal(x.deadline) {
				return h2up.Head{}, errCallDeadline
			}
			return h2up.Head{}, os.ErrDeadlineExceeded
		}
		if x.Door.Gone() {
			return hd, errClientGone
		}
		if pm.failedOnClient() {
			return hd, pm.err
		}
	}
}

// lost: a stream the backend did not process (refused, above its
// GOAWAY's last stream id, or one whose head never went out) may go to
// another backend whatever the method; any other failure is a lost
// stream.
func (h *h2Session) lost(err error) loss {
	if errors.Is(err, h2up.ErrRefused) {
		return lossRefused
	}
	return lossConn
}

// reopen: a backend that lowered its stream limit after the stream was
// opened took nothing; the request takes a stream again, on a
// connection with room under the new limit, a bounded number of times.
func (h *h2Session) reopen(err error) bool {
	return errors.Is(err, h2up.ErrOverLimit) && h.opens < maxReopens
}

// tunnel is never asked for: upgrade turns protocol upgrades away, and
// h2up takes no 101 head.
func (h *h2Session) tunnel() (net.Conn, []byte) { return nil, nil }

func (h *h2Session) body(x *Exchange, resp *h1.Response, drop []byte) {
	x.respBody.resetStream(h.s, resp.Body, x.Door, h.p.core.streamIdle(), x.deadline, drop)
}

func (h *h2Session) finish(in int64) (int64, error) {
	if h.pm == nil {
		return in, nil
	}
	return h.pm.finish(in), h.pm.err
}

func (h *h2Session) trailerStatus(*Exchange) string {
	return grpcStatusOfFields(h.s.Trailers())
}

// reusable: a stream carries one request; its connection is shared and
// stays.
func (h *h2Session) reusable(*Exchange, *h1.Response) bool { return false }

// close recycles the stream: the attempt is done with it, its body's
// sender too (finish).
func (h *h2Session) close(bool) {
	h.s.Recycle()
	h.s, h.pm = nil, nil
}

// duplex returns the request body as one that can be read while the
// response is answered, or nil when it cannot.
func (x *Exchange) duplex() duplexBody {
	body := x.Body
	if l, ok := body.(*limitedBody); ok {
		body = l.Body
	}
	db, _ := body.(duplexBody)
	return db
}

// streamResponse fills resp from an HTTP/2 response head. The fields are
// views of the head's strings; content-length is the door's to write.
func (x *Exchange) streamResponse(resp *h1.Response, h *h2up.Head) {
	*resp = h1.Response{Fields: resp.Fields[:0], Minor: 1, Status: h.Status}
	for i := range h.Fields {
		f := &h.Fields[i]
		name := bytesOf(f.Name)
		resp.Fields = append(resp.Fields, h1.Field{Name: name, Value: bytesOf(f.Value),
			Hop: f.Name == "content-length" || connectionSpecific(name)})
	}
	switch {
	case x.Req.IsMethod("HEAD") || h.Status == 204 || h.Status == 304:
		// No content, whatever follows the head: a client reads none,
		// so any would be taken for the next response. content-length
		// is the representation's, passed on as it is.
		resp.Body, resp.ContentLength = h1.BodyNone, h.ContentLength
	case h.End:
		resp.Body, resp.ContentLength = h1.BodyNone, max(h.ContentLength, 0)
	case h.ContentLength >= 0:
		resp.Body, resp.ContentLength = h1.BodyLength, h.ContentLength
	default:
		resp.Body, resp.ContentLength = h1.BodyChunked, -1
	}
}

// grpcStatusOfFields returns the grpc-status among HTTP/2 trailers.
func grpcStatusOfFields(fs []hpack.HeaderField) string {
	for i := range fs {
		if fs[i].Name == "grpc-status" {
			return grpcStatusText(bytesOf(fs[i].Value))
		}
	}
	return ""
}

// sendStream sends the request body on s: the bytes prepare put behind
// the head, those kept from an attempt the backend refused, then the rest
// from the client, and the client's trailers. A client-side failure is
// wrapped in errClientBody. Body bytes read from the client are kept in
// x.sent while they fit in hold; past that the request is no longer
// replayable.
func (x *Exchange) sendStream(s *h2up.Stream, inline []byte, hold int64, timeout time.Duration) (in int64, err error) {
	for _, p := range [2][]byte{inline, x.sent} {
		if len(p) == 0 {
			continue
		}
		s.SetWriteTimeout(timeout)
		if _, err := s.Write(p); err != nil {
			return in, err
		}
		in += int64(len(p))
	}
	if x.Body == nil || x.Body.Done() {
		return in, x.closeWrite(s, timeout)
	}
	if x.Req.Expect100 && !x.streamed && len(x.sent) == 0 {
		if err := x.Door.Continue(); err != nil {
			return in, errors.Join(errClientBody, err)
		}
	}
	bp := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(bp)
	buf := *bp
	for {
		k, rerr := x.Body.Read(buf)
		if k > 0 {
			if !x.streamed && int64(len(x.sent)+k) <= hold {
				x.sent = append(x.sent, buf[:k]...)
			} else {
				x.streamed = true
			}
			s.SetWriteTimeout(timeout)
			if _, err := s.Write(buf[:k]); err != nil {
				return in, err
			}
			in += int64(k)
		}
		if rerr == io.EOF {
			return in, x.closeWrite(s, timeout)
		}
		if rerr != nil {
			return in, errors.Join(errClientBody, rerr)
		}
	}
}

// closeWrite ends the request on s, with the client's trailers if any.
func (x *Exchange) closeWrite(s *h2up.Stream, timeout time.Duration) error {
	var tr []hpack.HeaderField
	if x.Body != nil {
		if raw := x.Body.Trailers(); len(raw) > 0 {
			tr = x.trailerFields(raw, x.trailHops)
		}
	}
	s.SetWriteTimeout(timeout)
	return s.CloseWrite(tr)
}

// streamIdle is how long nothing may move on a stream to an HTTP/2
// backend.
func (c *Core) streamIdle() time.Duration {
	if c.cfg.StreamIdleTimeout > 0 {
		return c.cfg.StreamIdleTimeout
	}
	return time.Minute
}
