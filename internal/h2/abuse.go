package h2

import (
	"time"

	"golang.org/x/net/http2"
)

// relay bounds what an HTTP/2 client may make it do without asking for
// anything relay serves. A connection that passes a bound gets GOAWAY
// ENHANCE_YOUR_CALM and is closed; the decision is taken once per
// connection, and one line is logged for it, through the server's abuse
// log, whose lines are rate limited relay-wide (abuseLines).

// resetMinStreams and the rule it belongs to bound Rapid Reset
// (CVE-2023-44487): a client opens streams and cancels them at once, so
// relay starts work it never gets to finish, or opens streams relay has
// to refuse. As Envoy does, relay closes a connection on which most
// streams end without a useful answer: once a client has opened
// resetMinStreams streams, if more than half of them were wasted, the
// connection is closed. A stream is wasted when the client cancels it
// before relay answered, or relay refuses it for the client's fault: a
// stream error (PROTOCOL_ERROR, REFUSED_STREAM over the stream limit and
// the like) or relay's own answer instead of forwarding (400, 405, 431).
// A backend's answer, 4xx or not, is useful. A stream refused for a
// bound of relay's that the client cannot know is not wasted: one refused
// for want of descriptors costs nothing, one refused for the header memory
// of the connection's open streams (budget.go) a frame of the control
// budget. Independently, a client whose cancelled streams are still being
// wound down may not make relay run more than runningPerStream times its
// stream limit at once.
const (
	resetMinStreams  = 500
	runningPerStream = 4
)

// The control budget bounds floods of frames that carry no request
// (CVE-2019-9512 PING, -9515 SETTINGS, -9518 empty frames, and the like):
// each PING, SETTINGS, PRIORITY, RST_STREAM, WINDOW_UPDATE, GOAWAY or
// unknown frame, each CONTINUATION that does not end its header block,
// each DATA frame that is empty without ending its stream, and each frame
// for a stream relay no longer reads costs one. A connection starts with
// controlBudget; each stream the client opens adds controlPerStream, each
// DATA frame relay sends controlPerData (a client grants window back as
// it reads) and each second the connection is open controlPerSecond
// (keepalive PINGs), never above controlBudget. A client that overdraws
// it is cut off. Work a client asks for thus pays for its control frames:
// a flood costs relay at most controlBudget frames' work more than the
// requests served.
const (
	controlBudget    = 1000
	controlPerStream = 10
	controlPerData   = 10
	controlPerSecond = 1
)

// abuseLines caps the abuse warnings the server logs per second; the
// lines dropped are counted in the next one that goes out.
const abuseLines = 10

// abuse is a connection's bookkeeping for the bounds above.
type abuse struct {
	// Under the connection's mu.
	opened int  // streams the client opened, refused ones included
	wasted int  // of those, ended without a useful answer
	cut    bool // relay decided to close the connection for abuse
	// goneAway is closed once relay's GOAWAY with an error is out
	// (goAway): it is sent once.
	goneAway chan struct{}
	drain    bool // the reading goroutine is to linger, then close (calmFromStream)

	// The reading goroutine's only.
	budget    int       // control frames the client may still send
	control   int       // control frames counted, for the log
	seenOpen  int       // opened when the budget was last refilled
	seenData  uint64    // dataSent then
	refilled  time.Time // when it was, to the second
	overdrawn bool      // the budget ran out: reading ends
	calmError error     // the error reading ends with then
}

// cutOff decides that the client abuses the connection, once: the first
// call logs why and reports true; later ones, whichever bound they come
// from, report false and log nothing.
func (c *conn) cutOff(msg string, args ...any) bool {
	c.mu.Lock()
	first := !c.ab.cut
	c.ab.cut = true
	c.mu.Unlock()
	if first {
		c.srv.abuseLog.Warn(msg, append([]any{"client", c.nc.RemoteAddr().String()}, args...)...)
	}
	return first
}

// calm is the error that ends the reading of a connection cut off for
// abuse: the GOAWAY ENHANCE_YOUR_CALM to send if this was the decision
// (first), or a plain end if another goroutine decided and sends it.
func calm(first bool) error {
	if first {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return errConnClosed
}

// calmFromStream sends GOAWAY ENHANCE_YOUR_CALM for a decision a
// stream's goroutine took, and has the reading goroutine end the
// connection: only that goroutine reads, and it lingers before it closes
// (failed), since closing at once with the client's bytes unread would
// reset the connection and could lose the GOAWAY.
func (c *conn) calmFromStream() {
	c.mu.Lock()
	if c.ab.goneAway != nil {
		c.mu.Unlock()
		return
	}
	c.ab.goneAway = make(chan struct{})
	c.goingAway = true
	last := c.maxID
	c.mu.Unlock()
	c.lockWrite()
	c.wfr.WriteGoAway(last, http2.ErrCodeEnhanceYourCalm, nil)
	c.unlockWriteNow()
	c.mu.Lock()
	c.ab.drain, c.lingering = true, true
	c.nc.SetReadDeadline(time.Now()) // wakes the reading goroutine
	close(c.ab.goneAway)
	c.mu.Unlock()
}

// draining reports whether calmFromStream asked the reading goroutine to
// linger and close.
func (c *conn) draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ab.drain
}

// wastedTooMuch reports whether the Rapid Reset rule closes the
// connection now. mu is held.
func (c *conn) wastedTooMuch() bool {
	return c.ab.opened >= resetMinStreams && 2*c.ab.wasted > c.ab.opened && !c.ab.cut
}

// cutForWaste cuts the connection off under the Rapid Reset rule, with
// the counts taken under mu; it reports whether this call decided.
func (c *conn) cutForWaste(opened, wasted int) bool {
	return c.cutOff("HTTP/2 client wasted most of its streams, cancelled or refused before an answer (Rapid Reset); connection closed",
		"streams", opened, "wasted", wasted)
}

// spend takes a control frame from the budget; once it is overdrawn,
// overdrawn is set and the connection's reading ends (flood). It takes no
// lock: it runs on the reading goroutine, the only one that writes opened.
func (c *conn) spend() {
	c.ab.control++
	c.ab.budget--
	if c.ab.budget >= 0 || c.ab.overdrawn {
		return
	}
	// What the client did since the last refill pays.
	now := time.Now()
	data := c.dataSent.Load()
	secs := now.Sub(c.ab.refilled) / time.Second
	credit := int64(controlPerStream)*int64(c.ab.opened-c.ab.seenOpen) +
		int64(controlPerData)*int64(data-c.ab.seenData) + int64(controlPerSecond)*int64(secs)
	c.ab.seenOpen, c.ab.seenData = c.ab.opened, data
	c.ab.refilled = c.ab.refilled.Add(secs * time.Second)
	c.ab.budget = int(min(int64(c.ab.budget)+credit, controlBudget))
	c.ab.overdrawn = c.ab.budget < 0
}

// flood cuts off a client that overdrew the control budget with a frame
// of type t, and returns the error that ends reading.
func (c *conn) flood(t http2.FrameType) error {
	if c.ab.calmError == nil {
		c.ab.calmError = calm(c.cutOff("HTTP/2 client sends too many frames that carry no request (control frame flood); connection closed",
			"frames", c.ab.control, "last", t.String(), "streams", c.ab.opened))
	}
	return c.ab.calmError
}
