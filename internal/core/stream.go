package core

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
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

// tryStream sends x to b as a stream over HTTP/2 and relays the response.
func (p *Pool) tryStream(cs *conns, b *backend.Backend, x *Exchange, now time.Time, proto Protocol) attempt {
	x.response = -1
	if x.Req.Upgrade {
		return attempt{verdict: failed, status: 502, msg: "a protocol upgrade cannot be carried to an HTTP/2 backend",
			health: unjudged}
	}
	var inline []byte
	for tries := 1; ; tries++ {
		s, fresh, err := cs.openStream(proto)
		if x.timed {
			x.connect = 0
			if fresh {
				x.connect = time.Since(now)
			}
		}
		if err != nil {
			return p.unreachable(b, x, err)
		}
		if tries == 1 {
			if !x.prepared {
				x.prepare(p.core, b)
			}
			scheme := "http"
			if proto == H2 {
				scheme = "https"
			}
			inline = x.streamHead(scheme)
		}
		a, over := p.exchangeStream(b, s, x, inline)
		// exchangeStream is done with s, its body's sender too (pump).
		s.Recycle()
		// A backend that lowered its stream limit after the stream was
		// opened took nothing: the request takes a stream again, on a
		// connection with room under the new limit.
		if !over || tries == maxReopens {
			return a
		}
	}
}

// maxReopens bounds how many times one attempt takes a stream again
// because the backend lowered its stream limit meanwhile.
const maxReopens = 3

// exchangeStream writes the request on s and relays the response. over
// says the head did not go out because the backend lowered its stream
// limit since s was opened (h2up.ErrOverLimit).
func (p *Pool) exchangeStream(b *backend.Backend, s *h2up.Stream, x *Exchange, inline []byte) (attempt, bool) {
	cfg := p.cfg()
	end := len(inline) == 0 && len(x.sent) == 0 && x.bodySent()
	db := x.duplex()
	// A body still arriving from an HTTP/2 client is sent while the
	// response comes; one whole in memory (a unary call's message, a
	// held body) goes out with the head in one write; an HTTP/1.1
	// client's is sent first, as on the HTTP/1.1 path.
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
		return p.streamFailed(x, err, 0, false), errors.Is(err, h2up.ErrOverLimit)
	}
	var sent time.Time
	if x.timed {
		sent = time.Now()
	}
	var pm *pump
	var in int64
	switch {
	case end:
	case duplex:
		pm = startPump(x, s, inline, p.core.cfg.HoldBodyBytes, cfg.ResponseTimeout, db)
	default:
		var err error
		in, err = x.sendStream(s, inline, p.core.cfg.HoldBodyBytes, cfg.ResponseTimeout)
		s.Release()
		if errors.Is(err, errClientBody) {
			o := p.core.bodyFailed(x, err, in)
			return attempt{status: o.Status, in: in, out: o.Out}, false
		}
		// A write the backend refused: reading reports why.
	}
	s.Release()
	resp := &x.resp
	interim := false
	var head h2up.Head
	for {
		var err error
		head, err = p.awaitHead(s, x, pm)
		if err != nil {
			in = pm.finish(in)
			if pm != nil && errors.Is(pm.err, errClientBody) && !errors.Is(err, errClientGone) {
				o := p.core.bodyFailed(x, pm.err, in)
				return attempt{status: o.Status, in: in, out: o.Out}, false
			}
			return p.streamFailed(x, err, in, interim), false
		}
		if head.Status >= 200 {
			break
		}
		if head.Status != 100 {
			x.streamResponse(resp, &head)
			if len(x.rid) > 0 {
				x.answerWithID(resp)
			}
			if x.Door.Interim(resp) != nil {
				in = pm.finish(in)
				return attempt{status: 499, in: in}, false
			}
			interim = true
		}
	}
	if x.timed {
		x.response = time.Since(sent)
	}
	x.streamResponse(resp, &head)
	x.answerHead(b, resp)
	grpc, drop := p.judgeAnswer(x, resp)
	x.respBody.resetStream(s, resp.Body, x.Door, p.core.streamIdle(), x.deadline, drop)
	out, rerr, werr := x.Door.Respond(resp, &x.respBody)
	x.respBody.endFilter()
	in = pm.finish(in)
	a := attempt{status: resp.Status, in: in, out: out, health: served, grpc: grpc}
	if grpc == "" && x.grpc && rerr == nil && werr == nil {
		a.grpc = grpcStatusOfFields(s.Trailers())
	}
	switch {
	case errors.Is(rerr, errClientGone):
		a.status, a.health = 499, unjudged
	case errors.Is(rerr, errCallDeadline):
		// The call's deadline, as before the head: nobody's fault.
		a.health = unjudged
	case rerr != nil:
		a.health, a.fault = faulted, "response body broken off: "+rerr.Error()
	}
	return a, false
}

// awaitHead waits for the next response head. The wait is bounded by
// response_timeout from the request's end, by the idle timeout while the
// request body is still being sent, and by the call's deadline; every watchInterval
// it looks at whether the client is still there, and whether the body
// sender failed on the client's side.
func (p *Pool) awaitHead(s *h2up.Stream, x *Exchange, pm *pump) (h2up.Head, error) {
	for {
		timeout := p.cfg().ResponseTimeout
		if pm.sending() {
			// The backend may wait for more of the request before it
			// answers (a bidirectional call): while the body is open
			// the wait ends only when nothing moves.
			timeout = p.core.streamIdle()
		}
		limit := s.LastActive().Add(timeout)
		if !x.deadline.IsZero() && x.deadline.Before(limit) {
			limit = x.deadline
		}
		// The stream reads the clock only if it must wait; the clock is
		// read here only when a wait ran out.
		s.SetReadLimit(limit, watchInterval)
		h, err := s.ReadHead()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return h, err
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
			return h, errClientGone
		}
		if pm.failedOnClient() {
			return h, pm.err
		}
	}
}

// streamFailed maps a failure to get a response head on a stream to an
// attempt. interim says an informational response reached the client.
func (p *Pool) streamFailed(x *Exchange, err error, in int64, interim bool) attempt {
	a := attempt{verdict: failed, status: 502, msg: "backend sent no valid response", in: in,
		health: faulted, fault: "no valid response: " + err.Error()}
	switch {
	case errors.Is(err, errClientGone):
		return attempt{verdict: answered, status: 499, in: in}
	case errors.Is(err, errCallDeadline):
		// The client's deadline: the backend is not to blame.
		a.status, a.msg, a.health, a.fault = 504, "the call's deadline passed", unjudged, ""
	case errors.Is(err, os.ErrDeadlineExceeded):
		a.status, a.msg, a.fault = 504, "backend did not answer in time", "no response in time"
	case errors.Is(err, h2up.ErrRefused):
		// The backend did not process the request: another may, whatever
		// the method. A GOAWAY or a refused stream is the backend
		// shedding load or going away, not failing.
		a.msg, a.health, a.fault = "backend refused the request", unjudged, ""
		if x.replayable() && !interim {
			a.verdict = retry
		}
	case x.Req.Idempotent() && x.replayable() && !interim:
		a.verdict = retry
	}
	return a
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
