package h2up

import (
	"bufio"
	"errors"
	"time"
)

// relay bounds what a backend may make it do without answering anything.
// A backend that passes a bound gets GOAWAY ENHANCE_YOUR_CALM and loses
// the connection, with one line logged.
//
// The control budget bounds floods of frames that carry no response
// (PING, SETTINGS, WINDOW_UPDATE, RST_STREAM, PRIORITY, unknown frames,
// empty DATA that does not end its stream, frames for streams relay no
// longer reads): each costs one. A connection starts with controlBudget;
// each HEADERS or DATA frame relay sends adds controlPerSent (the backend
// answers them with WINDOW_UPDATEs, resets and the like) and each second
// the connection is open controlPerSecond (keepalive PINGs), never above
// controlBudget. A flood thus costs relay at most controlBudget frames'
// work more than the requests sent.
const (
	controlBudget    = 1000
	controlPerSent   = 10
	controlPerSecond = 10
)

// errCalm ends a connection whose backend abused it.
var errCalm = errors.New("h2up: the backend sends too many frames that carry no response (control frame flood)")

// errHeaderFlood ends a connection whose backend sent a header block
// longer than relay reads.
var errHeaderFlood = errors.New("h2up: the backend sent a header block far over the header limit (CONTINUATION flood)")

// budget is the reading goroutine's count of control frames.
type budget struct {
	left     int       // control frames the backend may still send
	spent    int       // counted, for the log
	seenSent uint64    // c.sent when the budget was last refilled
	refilled time.Time // when it was, to the second
}

func (b *budget) init(now time.Time) { b.left, b.refilled = controlBudget, now }

// spend takes a control frame from the budget and reports whether the
// backend overdrew it. What relay sent since the last refill, and the time
// gone by, pay first.
func (c *Conn) spend() bool {
	b := &c.ab
	b.spent++
	b.left--
	if b.left >= 0 {
		return false
	}
	now := time.Now()
	sent := c.sent.Load()
	secs := now.Sub(b.refilled) / time.Second
	credit := int64(controlPerSent)*int64(sent-b.seenSent) + int64(controlPerSecond)*int64(secs)
	b.seenSent = sent
	b.refilled = b.refilled.Add(secs * time.Second)
	b.left = int(min(int64(b.left)+credit, controlBudget))
	return b.left < 0
}

// blockReader is what the framer reads from: the connection's buffered
// reader, with the frame headers going by followed, so that a header
// block (HEADERS and its CONTINUATION frames) that runs on past twice the
// header limit ends the connection. The framer stops decoding a list over
// the limit but would read CONTINUATION frames, empty ones too, for ever.
// The framer reads a frame header, then its payload, each whole, so the
// reads never span the two.
type blockReader struct {
	r     *bufio.Reader
	limit int // the most bytes a header block may take on the wire

	hdr   [9]byte
	nhdr  int    // header bytes of the current frame seen
	left  uint32 // payload bytes of the current frame still to come
	block int    // bytes of the open header block so far
	err   error  // reported by the next Read
}

// Frame types and flags, as the frame header carries them.
const (
	typeHeaders      = 0x1
	typePushPromise  = 0x5
	typeContinuation = 0x9
	flagEndHeaders   = 0x4
)

func (b *blockReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left > 0 {
		if uint32(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.r.Read(p)
		b.left -= uint32(n)
		return n, err
	}
	if len(p) > len(b.hdr)-b.nhdr {
		p = p[:len(b.hdr)-b.nhdr]
	}
	n, err := b.r.Read(p)
	copy(b.hdr[b.nhdr:], p[:n])
	b.nhdr += n
	if b.nhdr == len(b.hdr) {
		b.nhdr = 0
		b.frame()
	}
	return n, err
}

// frame follows the frame whose header was just read.
func (b *blockReader) frame() {
	length := uint32(b.hdr[0])<<16 | uint32(b.hdr[1])<<8 | uint32(b.hdr[2])
	b.left = length
	switch b.hdr[3] {
	case typeHeaders, typePushPromise:
		b.block = len(b.hdr) + int(length)
	case typeContinuation:
		b.block += len(b.hdr) + int(length)
		if b.block > b.limit {
			b.err = errHeaderFlood
		}
	}
}
