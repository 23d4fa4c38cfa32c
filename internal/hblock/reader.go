package hblock

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Reader reads frames as http2.Framer does with ReadMetaHeaders set, a
// HEADERS frame and its CONTINUATION frames coming back as one
// *http2.MetaHeadersFrame with its fields decoded and checked, but with
// one frame and one list of fields kept for the connection's life
// instead of new ones for every block: the frame and its Fields are
// valid until the next ReadFrame, and a caller keeping fields copies
// them (the strings themselves stay valid).
//
// The checks are the framer's: names in lower case, values without
// forbidden bytes, pseudo-fields first, known and not repeated, a list
// larger than the framer's MaxHeaderListSize marked Truncated, a block
// that runs on far past it, or that goes on after an invalid field, a
// connection error.
type Reader struct {
	fr   *http2.Framer
	dec  *hpack.Decoder
	meta http2.MetaHeadersFrame
	emit func(hpack.HeaderField)

	// State of the block being decoded.
	left, trailerLeft uint32 // what the list may still take
	sawRegular        bool
	invalid           error
}

// NewReader reads from fr, which must not have ReadMetaHeaders set; its
// MaxHeaderListSize bounds the lists.
func NewReader(fr *http2.Framer) *Reader {
	r := &Reader{fr: fr, dec: hpack.NewDecoder(DefaultTable, nil)}
	r.emit = r.field
	r.dec.SetEmitFunc(r.emit)
	return r
}

// ReadFrame returns the next frame, a header block as one
// *http2.MetaHeadersFrame.
func (r *Reader) ReadFrame() (http2.Frame, error) {
	f, err := r.fr.ReadFrame()
	if err != nil {
		return f, err
	}
	hf, ok := f.(*http2.HeadersFrame)
	if !ok {
		return f, nil
	}
	return r.block(hf)
}

func (r *Reader) block(hf *http2.HeadersFrame) (http2.Frame, error) {
	mh := &r.meta
	clear(mh.Fields)
	*mh = http2.MetaHeadersFrame{HeadersFrame: hf, Fields: mh.Fields[:0]}
	max := r.fr.MaxHeaderListSize
	if max == 0 {
		max = 16 << 20
	}
	r.left, r.trailerLeft, r.sawRegular, r.invalid = max, max, false, nil
	r.dec.SetEmitEnabled(true)
	r.dec.SetMaxStringLength(int(max))
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// A fragment far past what the list may still take is not
		// decoded; nor is anything after an invalid field.
		if int64(len(frag)) > 2*int64(r.left+r.trailerLeft) || r.invalid != nil {
			r.dec.Close()
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := r.dec.Write(frag); err != nil {
			r.dec.Close()
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.dec.Close()
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame) // the framer sees to the order
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := r.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(mh.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return mh, nil
}

// field takes one decoded field.
func (r *Reader) field(f hpack.HeaderField) {
	switch {
	case !httpguts.ValidHeaderFieldValue(f.Value):
		r.invalid = fmt.Errorf("invalid value of field %q", f.Name)
	case strings.HasPrefix(f.Name, ":"):
		if r.sawRegular {
			r.invalid = errors.New("pseudo-field after a regular field")
		}
	default:
		r.sawRegular = true
		if !validName(f.Name) {
			r.invalid = fmt.Errorf("invalid field name %q", f.Name)
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
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
		r.dec.SetEmitEnabled(false)
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
