package core

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
	"relay/internal/h1"
	"relay/internal/route"
	"relay/internal/stats"
)

// Exchange is one request on its way through the core, and the state the
// core keeps for it. A front door fills the exported fields for each request
// and hands the Exchange to Core.Forward; it may reuse one Exchange for the
// requests of a connection, which is how the HTTP/1.1 front door forwards
// without allocating.
type Exchange struct {
	// Req is the request head as the front door parsed it: method, target,
	// Host, the end-to-end fields (hop-by-hop ones marked Hop) and how its
	// body is framed. The core forwards it over HTTP/1.1 whatever protocol
	// the client spoke. The core marks the client's X-Forwarded-* and Via
	// fields Hop as it replaces them.
	Req *h1.Request
	// Body is the request body; nil when the request has none.
	Body Body
	// Door answers the client.
	Door Responder
	// Peer is the client as the front door sees it.
	Peer *Peer
	// Proto is the protocol the client spoke, for the access log:
	// "HTTP/1.1", "HTTP/1.0", "HTTP/2.0".
	Proto string

	// What the core builds and reads for the request, kept so a
	// connection's next request reuses the memory.
	head     []byte // the upstream request head, with inline body bytes
	inline   int64  // body bytes carried in head
	prepared bool   // head is built for this request
	streamed bool   // body bytes were read from the client: no replay
	resp     h1.Response
	respBody ResponseBody
	// start is when the request reached the core; chain the features
	// of its route or pool (the core's own until it is routed), pool the
	// pool that serves it, nil until routing found one; slots hold the
	// features' state of the request (slots.go).
	start             time.Time
	chain             *Chain
	pool              *Pool
	slots             [maxSlots]any
	rid               []byte        // the request's id; empty when ids are off (requestid.go)
	timed             bool          // measure the upstream times below
	connect, response time.Duration // the answering attempt's (logging.Entry); -1: none
	held              heldBody      // a small body read whole (body.go)
	limited           limitedBody   // a chunked body under MaxBodyBytes
	detached          []byte        // the request head's bytes while a body is held
	// What routing found (routing.go): the route's match, its name for
	// the access log ("" when none matched).
	match      route.Match
	routeName  string
	routeCount *stats.ByClass // the route's counter; nil when none matched
	// routeLimit is the route's rate limit, nil when none; limitedCount
	// the counter of the route's refusals; limitBuf holds the values of
	// a 429's fields (ratelimit.go).
	routeLimit   *limit
	limitedCount *atomic.Uint64
	limitBuf     []byte
	clientKey    [16]byte // the client's address as a rate limit's key
	// trailHops names the fields kept out of a chunked request's
	// trailers (prepare), respHops those kept out of the response's
	// (answerHead), each name followed by a comma: the ones the
	// features of the upstream request and response head phases remove.
	trailHops, respHops []byte
	// probe is the backend whose half-open breaker this attempt probes,
	// until its response head judges the probe (breaker.go).
	probe *backend.Backend
	// affinity is the sticky value the request carries, which names the
	// member its pool tries first (sticky.go); StickyCookies reads it
	// from the request's cookie. answering is the backend whose response
	// head the response head phase is making the client's.
	affinity  []byte
	answering *backend.Backend
	// grpc says the request is a gRPC call (grpc.go); deadline is when
	// it must end (its grpc-timeout), zero for none.
	grpc     bool
	deadline time.Time
	// For an HTTP/2 backend (session_h2.go): the request's fields as views of
	// head's bytes, names holding the lower-cased names; trailerBuf the
	// request's trailers that pass; and sent the body bytes read from
	// the client for the stream, kept while they fit in HoldBodyBytes so
	// that a stream the backend refused can be sent again.
	fields     []hpack.HeaderField
	names      []byte
	trailerBuf []byte
	sent       []byte
	// The sessions an attempt reaches its backend through (session.go),
	// readied for each attempt: kept here, taking one allocates nothing.
	h1s h1Session
	h2s h2Session
}

// Peer is a client connection's address, worked out once per connection.
type Peer struct {
	// Addr is the client's address and port; IPv4-mapped IPv6 addresses
	// are unmapped.
	Addr netip.AddrPort
	// Text is Addr's address as text, for X-Forwarded-For.
	Text []byte
	// Trusted reports that the peer is one of the trusted proxies, whose
	// X-Forwarded-* fields are kept.
	Trusted bool
	// TLS reports that the client connected over TLS.
	TLS bool
	// Client is what the TLS handshake established (Core.ClientTLSOf),
	// nil on a cleartext connection.
	Client *ClientTLS
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// Scheme is the scheme the client used: "http" or "https".
func (p *Peer) Scheme() []byte {
	if p.TLS {
		return schemeHTTPS
	}
	return schemeHTTP
}

// Body is a request body as a front door delivers it.
type Body interface {
	// Read reads the next body bytes; io.EOF at the end. The front door
	// bounds each wait for the client.
	Read(p []byte) (int, error)
	// Prefix returns body bytes that are already in memory and consumes
	// them, so they can go out with the head in one write; it is called
	// once, before any Read, and may return nil.
	Prefix() []byte
	// Done reports whether the body has been read to its end.
	Done() bool
	// Trailers returns the raw trailer field lines of a chunked body once
	// Read has returned io.EOF.
	Trailers() []byte
}

// Responder is the front door's side of an exchange: everything the core
// sends the client goes through it, so the core never writes a wire format
// of the client's.
type Responder interface {
	// Continue asks the client for its body (Expect: 100-continue). The
	// core calls it once, before it first reads a body it streams.
	Continue() error
	// Interim passes on an informational (1xx) response other than 100
	// Continue; a front door that cannot send one drops it.
	Interim(resp *h1.Response) error
	// Respond sends the response head in resp and then its body, first
	// body.Prefix() and then what body reads until io.EOF. It returns the
	// body bytes sent, the error reading body (the backend failed) and the
	// error writing to the client.
	Respond(resp *h1.Response, body *ResponseBody) (n int64, rerr, werr error)
	// Tunnel completes a protocol switch (101): it sends resp, then
	// early, the bytes that arrived behind the backend's head, and copies
	// bytes both ways between the client and up until either side closes.
	// It returns the bytes sent to the client. up is closed afterwards.
	Tunnel(resp *h1.Response, up net.Conn, early []byte) int64
	// Gone reports whether the client is known to have gone away: closed
	// or reset its connection, or cancelled its request. The core asks
	// while it waits for a backend, so a client that gave up cancels its
	// upstream request. It must be cheap and must not consume anything the
	// client sent (pipelined requests stay where they are).
	Gone() bool
	// Error answers with relay's own error response: status, a short
	// plain-text body (AppendErrorBody) and, on a 503, Retry-After:
	// RetryAfter. It returns the body bytes sent.
	Error(status int, msg string) (int64, error)
}

// RetryAfter is the Retry-After, in seconds, of relay's own 503 answers
// (no backend in rotation, every backend at its limit): by then a breaker
// may have let a probe through, a queue moved or a health check passed.
const RetryAfter = "1"

// AppendErrorBody appends the body of relay's own error response, the same
// for every front door: "Service Unavailable: no backend available\n".
func AppendErrorBody(b []byte, status int, msg string) []byte {
	b = append(b, h1.StatusText(status)...)
	b = append(b, ": "...)
	b = append(b, msg...)
	return append(b, '\n')
}

// ErrorBodyLen is the length of the body AppendErrorBody appends.
func ErrorBodyLen(status int, msg string) int64 {
	return int64(len(h1.StatusText(status)) + len(": ") + len(msg) + len("\n"))
}

// Outcome is what became of a request: the status the client got (499
// when it went away first), the backend that answered, if any, and the
// body bytes received from the client and sent to it.
type Outcome struct {
	Status  int
	Backend *backend.Backend
	In, Out int64
	// Retries is how many of the request's attempts were retried.
	Retries int
	// GRPCStatus is the grpc-status a gRPC response ended with ("0" for
	// OK), the backend's or relay's own; "" for a request that is not
	// gRPC or a response that carried none.
	GRPCStatus string
}

// bodySent reports whether the request body has been read to its end, so
// the upstream connection is positioned at the end of the request.
func (x *Exchange) bodySent() bool { return x.Body == nil || x.Body.Done() }

// replayable reports whether the request can be sent again: nothing of its
// body has been streamed from the client, so every byte sent so far is
// still held in x.head.
func (x *Exchange) replayable() bool { return !x.streamed }
