package hblock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Reader reads frames as http2.Framer does with ReadMetaHeaders set, a
// HEADERS frame and its CONTINUATION frames coming back as one
// *http2.MetaHeadersFrame with its fields decoded and checked. The
// framer reads every other frame; header blocks the Reader reads itself,
// into one frame, one payload buffer and one list of fields kept for the
// connection's life instead of new ones for every block: the frame and
// its Fields are valid until the next ReadFrame, and a caller keeping
// fields copies them (the strings themselves stay valid).
//
// The checks are the framer's: names in lower case, values without
// forbidden bytes, pseudo-fields first, known and not repeated, a list
// larger than the framer's MaxHeaderListSize marked Truncated, a block
// that runs on far past it, or that goes on after an invalid field, a
// connection error. The framer still sees every frame header, and
// checks sizes and that a block's frames come together.
type Reader struct {
	fr      *http2.Framer
	src     io.Reader // what fr reads from
	payload []byte
	frame   http2.HeadersFrame
	meta    http2.MetaHeadersFrame
	dec     decoder

	// State of the block being decoded.
	left, trailerLeft uint32 // what the list may still take
	sawRegular        bool
	invalid           error
}

// keptFields is the longest list of fields a Reader keeps between
// blocks: more than most requests carry, and 5 KiB.
const keptFields = 128

// NewReader reads from fr, which reads from src and must not have
// ReadMetaHeaders set; its MaxHeaderListSize bounds the lists.
func NewReader(fr *http2.Framer, src io.Reader) *Reader {
	r := &Reader{fr: fr, src: src}
	r.dec.max = DefaultTable
	r.dec.emit = r.field
	return r
}

// ReadFrame returns the next frame, a header block as one
// *http2.MetaHeadersFrame.
func (r *Reader) ReadFrame() (http2.Frame, error) {
	// The last block's fields are no longer the caller's: a list grown
	// long, by one block of many one-byte fields, is let go rather than
	// kept with the connection, which may now go quiet.
	if cap(r.meta.Fields) > keptFields {
		r.meta.Fields = nil
	}
	fh, err := r.fr.ReadFrameHeader()
	if err != nil {
		return nil, err
	}
	if fh.Type != http2.FrameHeaders {
		return r.fr.ReadFrameForHeader(fh)
	}
	return r.block(fh)
}

// block reads the header block a HEADERS frame with header fh begins.
func (r *Reader) block(fh http2.FrameHeader) (http2.Frame, error) {
	p, err := r.read(fh)
	if err != nil {
		return nil, err
	}
	if fh.StreamID == 0 {
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	r.frame = http2.HeadersFrame{FrameHeader: fh}
	var pad int
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return nil, http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		pad, p = int(p[0]), p[1:]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		v := binary.BigEndian.Uint32(p)
		pp := &r.frame.Priority
		pp.StreamDep, pp.Exclusive, pp.Weight = v&0x7fffffff, v&0x80000000 != 0, p[4]
		p = p[5:]
	}
	if pad > len(p) {
		// Padding as long as the payload or longer (RFC 9113 6.2).
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	frag, ended := p[:len(p)-pad], fh.Flags.Has(http2.FlagHeadersEndHeaders)

	mh := &r.meta
	clear(mh.Fields)
	*mh = http2.MetaHeadersFrame{HeadersFrame: &r.frame, Fields: mh.Fields[:0]}
	max := r.fr.MaxHeaderListSize
	if max == 0 {
		max = 16 << 20
	}
	r.left, r.trailerLeft, r.sawRegular, r.invalid = max, max, false, nil
	r.dec.begin(int(max))
	for {
		// A fragment far past what the list may still take is not
		// decoded; nor is anything after an invalid field.
		if int64(len(frag)) > 2*int64(r.left+r.trailerLeft) || r.invalid != nil {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if err := r.dec.write(frag); err != nil {
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		// The framer sees that a CONTINUATION of this stream comes next.
		fh, err := r.fr.ReadFrameHeader()
		if err != nil {
			return nil, err
		}
		if frag, err = r.read(fh); err != nil {
			return nil, err
		}
		ended = fh.Flags.Has(http2.FlagContinuationEndHeaders)
	}
	if err := r.dec.end(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(mh.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return mh, nil
}

// read reads the payload of the frame with header fh, into a buffer
// valid until the next read. The framer has checked its length.
func (r *Reader) read(fh http2.FrameHeader) ([]byte, error) {
	n := int(fh.Length)
	if cap(r.payload) < n || cap(r.payload) > 4<<10 && n <= 1<<10 {
		// Kept small between blocks: most are well under 1 KiB.
		r.payload = make([]byte, max(n, 1<<10))
	}
	p := r.payload[:n]
	if _, err := io.ReadFull(r.src, p); err != nil {
		return nil, err
	}
	return p, nil
}

// field takes one decoded field, with what the decoder's checks found
// of its strings.
func (r *Reader) field(f hpack.HeaderField, c checks) {
	switch {
	case !c.value:
		r.invalid = fmt.Errorf("invalid value of field %q", f.Name)
	case strings.HasPrefix(f.Name, ":"):
		if r.sawRegular {
			r.invalid = errors.New("pseudo-field after a regular field")
		}
	default:
		r.sawRegular = true
		if !c.name {
			r.invalid = fmt.Errorf("invalid field name %q", f.Name)
		}
	}
	if r.invalid != nil {
		r.dec.skip = true
		return
	}
	// A Trailer field names fields to come; it is counted by its names,
	// each as a field of its own, so a list of trailers cannot hide
	// behind it.
	left, size := &r.left, f.Size()
	if f.Name == "trailer" {
		n := uint32(strings.Count(f.Value, ",") + 1)
		left, size = &r.trailerLeft, uint32(len(f.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *left {
		r.dec.skip = true
		r.meta.Truncated = true
		r.left, r.trailerLeft = 0, 0
		return
	}
	*left -= size
	r.meta.Fields = append(r.meta.Fields, f)
}

// validName reports whether name is a token in lower case, as HTTP/2
// field names must be (RFC 9113 8.2.1).
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b >= 'A' && b <= 'Z' || !httpguts.IsTokenRune(rune(b)) {
			return false
		}
	}
	return true
}

// checkPseudos checks the pseudo-fields: known ones, none twice, not
// those of a request with those of a response.
func checkPseudos(pf []hpack.HeaderField) error {
	var request, response bool
	for i, f := range pf {
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return fmt.Errorf("unknown pseudo-field %q", f.Name)
		}
		for _, g := range pf[:i] {
			if g.Name == f.Name {
				return fmt.Errorf("pseudo-field %q twice", f.Name)
			}
		}
	}
	if request && response {
		return errors.New("request and response pseudo-fields together")
	}
	return nil
}
