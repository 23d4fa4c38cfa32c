package core

import (
	"net"
	"time"

	"relay/internal/h1"
)

// An attempt reaches its backend through a session: an HTTP/1.1
// connection (session_h1.go) or an HTTP/2 stream (session_h2.go). The
// attempt itself is written once, over the session (Pool.try and
// Pool.exchange in attempt.go): the breaker's judgement, when to send
// the request again, which failure is which status, the upstream times,
// the response head and body phases, the gRPC status. A session knows
// only how its protocol carries a request and its response:
//
//	upgrade    whether it can carry a protocol upgrade (HTTP/2 cannot)
//	open       a pooled connection or a dial; a stream on a connection
//	           with room, or a dial. It times itself for the access
//	           log (x.connect)
//	send       the request head in the protocol's form, then the body
//	           (HTTP/1.1: written inside the wait for the response; HTTP/2:
//	           with the head, or by a goroutine while the response comes)
//	readHead   the next response head, interim ones included, as an
//	           h1.Response
//	lost       what a failure before the response head says about
//	           sending the request again
//	reopen     whether the attempt takes a new session and sends the
//	           request again (a pooled HTTP/1.1 connection found closed,
//	           once; an HTTP/2 backend that lowered its stream limit)
//	tunnel     the connection a 101 switches to the new protocol
//	body       x.respBody over what carries the response body
//	finish     the request body's sender stopped, the response over
//	trailerStatus
//	           the gRPC status among the response's trailers
//	reusable   whether the session may carry another request
//	close      its end: pooled again when reuse, closed or recycled
//
// The sessions live in the Exchange (x.h1s, x.h2s) and are readied for
// each attempt, so taking one allocates nothing: one interface value per
// attempt, pointing into the exchange.
type session interface {
	// upgrade returns why the session cannot carry a request that asks
	// for a protocol upgrade (Upgrade), "" when it can. Only such a
	// request asks.
	upgrade() string
	// open readies the session for x: now is the attempt's start, from
	// which a dial is timed into x.connect (0 for a pooled connection).
	// A failure means nothing was sent.
	open(x *Exchange, now time.Time) error
	// send writes the request head x.prepare built, in the session's
	// protocol, and sends the body or starts sending it. It returns the
	// body bytes sent, when the request went out (when x.timed), and an
	// error only when the head did not go out or the client's side of
	// the body failed (errClientBody); a write the backend refused
	// otherwise is left for readHead to report.
	send(x *Exchange) (in int64, sent time.Time, err error)
	// readHead reads the next response head into resp, bounded by the
	// pool's timeouts, ending with errClientGone when the client went
	// away meanwhile.
	readHead(x *Exchange, resp *h1.Response) error
	// lost says what err, a failure before the response head, tells of
	// sending the request again.
	lost(err error) loss
	// reopen reports whether the attempt takes a new session (open again)
	// and sends the request again after err, a failure before the
	// response head that left the request retryable.
	reopen(err error) bool
	// tunnel returns the connection a 101 response switched to the new
	// protocol and the bytes that arrived behind the head.
	tunnel() (net.Conn, []byte)
	// body makes x.respBody the body of the response head resp; drop
	// names the fields the route removes from its trailers.
	body(x *Exchange, resp *h1.Response, drop []byte)
	// finish stops the request body's sender, the response being over,
	// and returns the body bytes sent (in, when nothing sends beside the
	// attempt) and how the sender failed.
	finish(in int64) (int64, error)
	// trailerStatus returns the grpc-status among the response's
	// trailers, "" for none; the response was read to its end.
	trailerStatus(x *Exchange) string
	// reusable reports whether the session may carry another request
	// once the response resp was relayed whole.
	reusable(x *Exchange, resp *h1.Response) bool
	// close ends the session: pooled for the next request when reuse,
	// otherwise closed (HTTP/1.1) or recycled (HTTP/2).
	close(reuse bool)
}

// loss is what a failure before the response head says about sending the
// request again.
type loss uint8

const (
	// lossUnknown: the backend may have acted on the request; it is not
	// sent again.
	lossUnknown loss = iota
	// lossConn: the connection or stream was lost before any response
	// byte; a request that can be sent twice (idempotent) may be.
	lossConn
	// lossRefused: the backend did not process the request (HTTP/2's
	// REFUSED_STREAM, GOAWAY); it may go anywhere, whatever the method.
	lossRefused
)

// ending is what becomes of a session after an exchange.
type ending uint8

const (
	closeConn  ending = iota // close (or recycle) it
	reuseConn                // the response was read to its end: pool it
	reopenConn               // take a new session and send the request again
)

// session readies the session that carries x's attempt to the backend of
// cs over proto.
func (x *Exchange) session(p *Pool, cs *conns, proto Protocol) session {
	if proto == HTTP1 {
		x.h1s = h1Session{p: p, cs: cs}
		return &x.h1s
	}
	x.h2s = h2Session{p: p, cs: cs, proto: proto}
	return &x.h2s
}
