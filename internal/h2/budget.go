package h2

import (
	"io"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// HPACK lets a client name a field it sent once with a byte: a 4 KB field
// in the dynamic table, referenced three times, makes a 24-byte header
// block a 12 KB request head for a backend. relay bounds what a
// connection's header blocks may decode to relative to what the client
// sends: each connection has a budget of decoded bytes (names and values)
// that starts at decodeBurst, grows by decodeRatio for every byte read
// from the client (frames of any kind, headers included) and never holds
// more than decodeBurst. A header block that takes the budget below zero
// is not served: relay sends GOAWAY ENHANCE_YOUR_CALM naming the streams
// it serves, lets them finish and closes the connection. A client that
// goes on sending header blocks after that, for a second budget's worth,
// is cut off at once.
//
// Why browsers are not cut: a browser's request references its cookie and
// user agent in a byte each, but its path and the rest still cost some 30
// to 80 bytes a request (frame header, indexes, a new :path, cookie
// crumbs), which earn 4 to 10 KB of budget at 128 to one: a request
// carrying a 3 KB cookie decodes to some 3.5 KB and leaves the budget
// where it was. A client whose requests decode to more than 128 times
// their size on the wire (one polling one URL with a 3 KB cookie, 16 bytes
// a request) draws the 1 MiB down by 1 to 2 KB a request, and after some
// 500 to 1,000 requests is asked, by a GOAWAY that lets its open requests
// finish, to go on over a new connection, where it sends its fields again
// (nginx closes HTTP/2 connections after keepalive_requests, 1,000, in
// the same way). The amplification relay allows is then at most 128 to
// one over a connection's life, plus 1 MiB per connection.
const (
	decodeRatio = 128
	decodeBurst = 1 << 20
)

// heldPerStream is the header list size (HPACK's count: names, values and
// 32 bytes a field) that an ordinary request is given room for when the
// connection's open streams together are bounded: a browser's request
// with a 4 KB cookie in crumbs counts some 6 KB. The open streams of a
// connection may hold header lists of heldPerStream times
// MaxConcurrentStreams in all (800 KiB with relay's 100), or 8 times
// MaxHeaderBytes if that is more; a stream that would take them past it
// is refused with REFUSED_STREAM (the client may send it again) until
// others end. The refusal is not a wasted stream under the Rapid Reset
// rule, since the request is within what relay advertises; it costs one
// frame of the control budget (abuse.go). A stream arriving when none holds any is always taken, so a
// single request of any size the other limits allow is served.
const heldPerStream = 8 << 10

// errAmplification is the GOAWAY's debug data when a connection's header
// blocks decode past its budget.
var errAmplification = []byte("header blocks decode to more than 128 times the bytes sent: open a new connection")

// fieldBudget is what a connection's header blocks may still decode, and
// what its open streams' header lists hold.
type fieldBudget struct {
	// wire counts the bytes read from the client.
	wire atomic.Int64

	// serve's goroutine only.
	credited int64 // the bytes of wire already turned into budget
	tokens   int64 // decoded bytes the budget still allows
	burst    int64 // the most it holds, and where it starts
	over     bool  // GOAWAY went out for going over

	// Under the connection's mu.
	held      int64 // header list sizes of the open streams
	heldLimit int64
}

func (b *fieldBudget) init(lim *Limits) {
	b.burst = max(decodeBurst, 4*int64(lim.MaxHeaderBytes))
	b.tokens = b.burst
	b.heldLimit = max(heldPerStream*int64(lim.MaxConcurrentStreams), 8*int64(lim.MaxHeaderBytes))
}

// chargeFields takes a header block's decoded bytes from the connection's
// budget. Past the budget, it sends GOAWAY ENHANCE_YOUR_CALM, so that the
// block's stream and those after it are not served; past it by a second
// budget, it returns the connection error that closes the connection.
func (c *conn) chargeFields(f *http2.MetaHeadersFrame) error {
	b := &c.fb
	wire := b.wire.Load()
	b.tokens = min(b.burst, b.tokens+decodeRatio*(wire-b.credited))
	b.credited = wire
	for i := range f.Fields {
		b.tokens -= int64(len(f.Fields[i].Name) + len(f.Fields[i].Value))
	}
	switch {
	case b.tokens >= 0:
		return nil
	case b.tokens < -b.burst:
		c.srv.log.Warn("HTTP/2 client kept sending header blocks far larger decoded than sent (HPACK amplification); connection closed",
			"client", c.nc.RemoteAddr().String(), "received", wire)
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	case !b.over:
		b.over = true
		c.srv.log.Warn("HTTP/2 client's header blocks decode to far more than it sends (HPACK amplification); no new streams served",
			"client", c.nc.RemoteAddr().String(), "received", wire)
		c.shutdownWith(http2.ErrCodeEnhanceYourCalm, errAmplification)
	}
	return nil
}

// holdFields reports whether a new stream's header list of size bytes
// fits beside those the open streams hold. mu is held.
func (b *fieldBudget) holdFields(size int64) bool {
	return b.held == 0 || b.held+size <= b.heldLimit
}

// countReads counts the bytes read through it.
type countReads struct {
	r io.Reader
	n *atomic.Int64
}

func (cr countReads) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n.Add(int64(n))
	return n, err
}
