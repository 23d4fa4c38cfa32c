package core

import (
	"errors"
	"io"
	"os"
	"strconv"

	"relay/internal/h1"
)

// Request bodies, before a backend is picked: the size limit, and holding
// small bodies whole.
//
// A body whose Content-Length is at most Config.HoldBodyBytes is read from
// the client before a backend is picked, as nginx buffers bodies: a client
// that sends it slowly holds no backend connection meanwhile, and a request
// that fails on one backend can be sent whole to another. Longer bodies,
// and chunked ones, stream to the backend as they arrive: they hold a
// backend connection for as long as the front door's body timeout lets the
// client take, and once a byte of them has been read from the client they
// are never sent twice.

// keepHeldBytes is the most memory a connection keeps between requests for
// held bodies; a larger buffer goes back to the garbage collector.
const keepHeldBytes = 16 << 10

// heldBody is a request body read whole into memory; the core forwards it
// in place of the front door's.
type heldBody struct {
	b    []byte
	done bool
}

func (h *heldBody) Prefix() []byte {
	h.done = true
	return h.b
}

func (h *heldBody) Read([]byte) (int, error) { h.done = true; return 0, io.EOF }
func (h *heldBody) Done() bool               { return h.done }
func (h *heldBody) Trailers() []byte         { return nil }

// limitedBody cuts a body off past max bytes, for bodies whose length is
// not known ahead (chunked): the read that passes it fails with 413.
type limitedBody struct {
	Body
	max, n int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	n, err := l.Body.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return n, &h1.Error{Status: 413, Msg: "request body larger than " + strconv.FormatInt(l.max, 10) + " bytes"}
	}
	return n, err
}

// admitBody applies the body limit and holds a small body whole. It
// reports false when it answered the client itself, with o saying how.
func (c *Core) admitBody(x *Exchange) (o Outcome, ok bool) {
	req := x.Req
	if max := c.cfg.MaxBodyBytes; max > 0 {
		if !req.Chunked && req.ContentLength > max {
			return c.refuse(x, 413, "request body larger than "+strconv.FormatInt(max, 10)+" bytes"), false
		}
		if req.Chunked {
			x.limited = limitedBody{Body: x.Body, max: max}
			x.Body = &x.limited
			return Outcome{}, true
		}
	}
	if req.Chunked || req.ContentLength > c.cfg.HoldBodyBytes {
		return Outcome{}, true
	}
	// Reading the body reuses the front door's buffer, where the head
	// may still be: the request view must outlive that.
	x.detached = req.Detach(x.detached)
	if req.Expect100 {
		// The client waits for this before it sends the body.
		if err := x.Door.Continue(); err != nil {
			return Outcome{Status: 499}, false
		}
	}
	held := append(x.held.b[:0], x.Body.Prefix()...)
	for int64(len(held)) < req.ContentLength {
		if len(held) == cap(held) {
			held = append(held, 0)[:len(held)]
		}
		n, err := x.Body.Read(held[len(held):min(cap(held), int(req.ContentLength))])
		held = held[:len(held)+n]
		if err != nil && !(errors.Is(err, io.EOF) && int64(len(held)) == req.ContentLength) {
			x.held.b = held
			return c.bodyFailed(x, err, int64(len(held))), false
		}
	}
	x.held = heldBody{b: held}
	x.Body = &x.held
	return Outcome{}, true
}

// bodyFailed answers a request whose body could not be read from the
// client: a broken framing or a limit gets its status, a client too slow
// gets 408, and one that went away gets nothing (499 in the log).
func (c *Core) bodyFailed(x *Exchange, err error, in int64) Outcome {
	var he *h1.Error
	switch {
	case errors.As(err, &he):
		o := c.refuse(x, he.Status, he.Msg)
		o.In = in
		return o
	case errors.Is(err, os.ErrDeadlineExceeded):
		o := c.refuse(x, 408, "request body not received in time")
		o.In = in
		return o
	}
	return Outcome{Status: 499, In: in}
}

// refuse answers with relay's own error before any backend was involved.
func (c *Core) refuse(x *Exchange, status int, msg string) Outcome {
	return x.answerError(status, msg, status == 413)
}

// releaseBody drops the request's body state once it is answered, keeping
// a small held buffer for the connection's next request.
func (x *Exchange) releaseBody() {
	if cap(x.held.b) > keepHeldBytes {
		x.held.b = nil
	}
	x.held.b = x.held.b[:0]
	x.limited = limitedBody{}
	if cap(x.detached) > keepHeldBytes {
		x.detached = nil
	}
	if cap(x.head) > 2*keepHeldBytes+4<<10 {
		x.head = nil
	}
	if cap(x.sent) > keepHeldBytes {
		x.sent = nil
	}
}

// Shed lets go of all the memory the exchange keeps for the connection's
// next request, and of its hold on the last upstream connection, for a
// connection that has gone idle: its next request allocates the memory
// again. Call it between requests only.
func (x *Exchange) Shed() {
	x.head, x.detached, x.rid = nil, nil, nil
	x.slots = [maxSlots]any{}
	x.sent, x.fields, x.names, x.trailerBuf = nil, nil, nil, nil
	x.held = heldBody{}
	x.resp = h1.Response{}
	x.respBody = ResponseBody{} // the last upstream and its reader
}
