package h2

import (
	"bufio"
	"errors"
	"net"
	"time"

	"golang.org/x/net/http2"
)

// errFrameTimeout ends a connection whose client started a frame, or a
// header block, and did not finish it within HeaderTimeout.
var errFrameTimeout = errors.New("h2: a frame or header block was not completed within the header timeout")

// frameReader is what the framer reads from: the connection's buffered
// reader, with the frame headers going by followed. It does two things
// the framer cannot:
//
//   - a frame whose first bytes have arrived, and a header block whose
//     HEADERS has (its CONTINUATION frames are due), must arrive whole
//     within HeaderTimeout, as an HTTP/1.1 request head must. Between
//     frames the connection waits without a read deadline: the idle watch
//     bounds that. The deadline is set only when a read must wait on the
//     socket in the middle of a frame or block, and cleared when it ends,
//     so frames that arrive whole cost no timer;
//   - it counts the CONTINUATION frames that do not end their block
//     against the control budget (abuse.go): the framer reads them inside
//     one ReadFrame, and would take empty ones without end.
type frameReader struct {
	c *conn
	r *bufio.Reader

	hdr   [frameHeaderLen]byte
	nhdr  int    // header bytes of the current frame seen
	left  uint32 // payload bytes of the current frame still to come
	block bool   // a header block is open
	armed bool   // the read deadline is set
	err   error  // reported by the next Read
}

const frameHeaderLen = 9

// Frame types and flags, as the frame header carries them.
const (
	typeHeaders      = 0x1
	typePushPromise  = 0x5
	typeContinuation = 0x9
	flagEndHeaders   = 0x4
)

func (fr *frameReader) Read(p []byte) (int, error) {
	if fr.err != nil {
		return 0, fr.err
	}
	if fr.r.Buffered() == 0 && !fr.armed && (fr.nhdr > 0 || fr.left > 0 || fr.block) {
		fr.setDeadline(true)
	}
	n, err := fr.r.Read(p)
	if err != nil {
		var ne net.Error
		if fr.armed && errors.As(err, &ne) && ne.Timeout() && !fr.c.isLingering() {
			err = errFrameTimeout
		}
		return n, err
	}
	fr.follow(p[:n])
	return n, nil
}

// follow reads the frame headers in b, the bytes the framer takes next.
func (fr *frameReader) follow(b []byte) {
	for len(b) > 0 {
		if fr.nhdr < frameHeaderLen {
			k := copy(fr.hdr[fr.nhdr:], b)
			fr.nhdr += k
			b = b[k:]
			if fr.nhdr < frameHeaderLen {
				return
			}
			fr.left = uint32(fr.hdr[0])<<16 | uint32(fr.hdr[1])<<8 | uint32(fr.hdr[2])
		} else {
			k := min(uint32(len(b)), fr.left)
			fr.left -= k
			b = b[k:]
		}
		if fr.left == 0 {
			fr.ended()
		}
	}
}

// ended takes note of a frame read whole.
func (fr *frameReader) ended() {
	fr.nhdr = 0
	typ, flags := fr.hdr[3], fr.hdr[4]
	switch typ {
	case typeHeaders, typePushPromise:
		fr.block = flags&flagEndHeaders == 0
	case typeContinuation:
		fr.block = flags&flagEndHeaders == 0
		if fr.block {
			fr.c.spend()
			if fr.c.ab.overdrawn {
				fr.err = fr.c.flood(http2.FrameContinuation)
			}
		}
	}
	if fr.armed && !fr.block {
		fr.setDeadline(false)
	}
}

// setDeadline sets the read deadline to HeaderTimeout from now, or clears
// it; a lingering connection keeps its own (closeSoon).
func (fr *frameReader) setDeadline(on bool) {
	c := fr.c
	d := c.srv.lim.HeaderTimeout
	if d <= 0 {
		return
	}
	fr.armed = on
	var t time.Time
	if on {
		t = time.Now().Add(d)
	}
	c.mu.Lock()
	if !c.lingering {
		c.nc.SetReadDeadline(t)
	}
	c.mu.Unlock()
}

// isLingering reports whether closeSoon set the read deadline.
func (c *conn) isLingering() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lingering
}
