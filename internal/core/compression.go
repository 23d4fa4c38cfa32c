package core

import (
	"relay/internal/compress"
	"relay/internal/h1"
	"relay/internal/stats"
)

// Compression compresses responses a route or pool gives clients that
// accept it (the compress: section), the first feature of the response
// body phase. It negotiates the coding from Accept-Encoding (RFC 9110
// 12.5.3) as the request goes upstream, and takes the response's head as
// it comes back: a response that may be compressed gets Content-Encoding,
// Vary: Accept-Encoding, chunked framing in place of its length, an ETag
// of its own coding, and its body goes through a pooled encoder that
// flushes whenever the backend's bytes so far have all been read, so
// that a streamed response streams while a body that comes at once is
// coded in whole blocks. What is never compressed: a response with a
// Content-Encoding, Cache-Control: no-transform, an answer to a Range
// request or a 206, HEAD, 1xx, 204 and 304, a length under min_length,
// text/event-stream, types outside the list, and, unless with_cookies is
// set, responses that set cookies (a secret in a cookie beside text an
// attacker chooses is what BREACH reads through compressed lengths); nor
// any response while the encoders in use hold the process's encoder
// memory (compress.SetEncoderMemory), so that clients that read slowly,
// or not at all, cannot make relay hold an encoder per stream without
// bound.
type Compression struct{ policy *compress.Policy }

// NewCompression returns the feature that compresses by p.
func NewCompression(p *compress.Policy) *Compression { return &Compression{policy: p} }

// compressSlot holds a request's compressState.
var compressSlot = NewSlot()

// compressState is what the feature knows of one request: the coding the
// client accepts best, whether its head asked for a range, the encoder
// of the response being compressed, and the buffer of the fields it
// rewrites (ETag, If-None-Match, If-Match).
type compressState struct {
	accept compress.Accept
	coding compress.Encoding
	ranged bool
	// revalidated says that If-None-Match carried a tag of coding's,
	// which the backend was sent without its suffix.
	revalidated bool
	encoder     *compress.Encoder
	// held says that the encoder was given bytes since its last flush.
	held bool
	buf  []byte
}

func (*Compression) FeatureName() string { return "compress" }

// FiltersBodies says that the feature acts in the response body phase.
func (*Compression) FiltersBodies() {}

// UpstreamHead negotiates the coding and takes its suffix out of the
// tags of the request's If-None-Match and If-Match, so that the backend,
// which knows only its own tag, answers a revalidation of the coded copy
// with 304 (compress.StripETags).
func (c *Compression) UpstreamHead(x *Exchange, out []byte) []byte {
	st := SlotState[compressState](x, compressSlot)
	st.accept.Reset()
	st.coding, st.ranged, st.revalidated, st.buf = compress.Identity, false, false, st.buf[:0]
	conditional := false
	fields := x.Req.Fields
	for i := range fields {
		f := &fields[i]
		if f.Hop {
			continue
		}
		switch len(f.Name) {
		case len("accept-encoding"):
			if f.Is("accept-encoding") {
				st.accept.Add(f.Value)
			}
		case len("range"):
			if f.Is("range") {
				st.ranged = true
			}
		case len("if-none-match"), len("if-match"):
			conditional = conditional || f.Is("if-none-match") || f.Is("if-match")
		}
	}
	if !x.Req.IsMethod("HEAD") {
		st.coding = c.policy.Choose(&st.accept)
	}
	if !conditional || st.coding == compress.Identity {
		return out
	}
	for i := range fields {
		f := &fields[i]
		if f.Hop {
			continue
		}
		if none := f.Is("if-none-match"); none || f.Is("if-match") {
			var changed bool
			out, changed = st.stripTags(out, f)
			st.revalidated = st.revalidated || none && changed
		}
	}
	return out
}

// stripTags writes f without the coding's suffixes in place of f when it
// carries any, and reports whether it did.
func (st *compressState) stripTags(out []byte, f *h1.Field) ([]byte, bool) {
	start := len(st.buf)
	var changed bool
	st.buf, changed = compress.StripETags(st.buf, f.Value, st.coding)
	if !changed {
		st.buf = st.buf[:start]
		return out, false
	}
	f.Hop = true
	return h1.AppendField(out, f.Name, st.buf[start:]), true
}

// ResponseHead decides whether the response is compressed, and makes its
// head say so.
func (c *Compression) ResponseHead(x *Exchange, resp *h1.Response) {
	st := SlotState[compressState](x, compressSlot)
	s := resp.Status
	if s < 200 || s == 204 || s == 101 || x.Req.IsMethod("HEAD") {
		return
	}
	// etag is the ETag field's index, not a pointer: appending Vary may
	// move resp.Fields.
	var ctype *h1.Field
	etag := -1
	vary, cookie := false, false
	for i := range resp.Fields {
		f := &resp.Fields[i]
		if f.Hop {
			continue
		}
		switch len(f.Name) {
		case len("content-type"):
			if f.Is("content-type") {
				ctype = f
			}
		case len("content-encoding"):
			if f.Is("content-encoding") && !isIdentity(f.Value) {
				return // coded already: relay never codes twice
			}
		case len("cache-control"):
			if f.Is("cache-control") && hasDirective(f.Value, "no-transform") {
				return
			}
		case len("vary"): // and len("etag")
			if f.Is("vary") && (hasDirective(f.Value, "accept-encoding") || hasDirective(f.Value, "*")) {
				vary = true
			} else if f.Is("etag") {
				etag = i
			}
		case len("set-cookie"):
			if f.Is("set-cookie") {
				cookie = true
			}
		}
	}
	if s == 304 {
		// The full response might have been compressed: a cache must
		// keep the representations of each coding apart.
		if !vary {
			resp.Fields = append(resp.Fields, varyField)
		}
		if st.revalidated && etag >= 0 && !isWeakTag(resp.Fields[etag].Value) {
			// The client revalidated its coded copy: the 304 carries
			// the tag the 200 would have (RFC 9110 15.4.5).
			st.codedTag(&resp.Fields[etag])
		}
		return
	}
	length := int64(-1)
	if resp.Body == h1.BodyLength {
		length = resp.ContentLength
	}
	if ctype == nil || !c.policy.Compressible(ctype.Value, length) || resp.Body == h1.BodyNone {
		return
	}
	// From here the response could have been compressed for another
	// client: it varies by Accept-Encoding whatever this one accepts.
	if !vary {
		resp.Fields = append(resp.Fields, varyField)
	}
	if st.coding == compress.Identity || st.ranged || s == 206 || (cookie && !c.policy.WithCookies()) {
		return
	}
	// The encoder first: with the process's encoder memory spent there
	// is none, and the response goes as the backend sent it, its head
	// untouched.
	enc := c.policy.Encoder(st.coding)
	if enc == nil {
		return
	}
	for i := range resp.Fields {
		f := &resp.Fields[i]
		switch len(f.Name) {
		case len("content-length"):
			if f.Is("content-length") {
				f.Hop = true
			}
		case len("accept-ranges"):
			if f.Is("accept-ranges") {
				f.Hop = true // ranges of the coded body are not the backend's
			}
		}
	}
	if etag >= 0 && !isWeakTag(resp.Fields[etag].Value) {
		st.codedTag(&resp.Fields[etag])
	}
	resp.Fields = append(resp.Fields, h1.Field{Name: contentEncodingField, Value: codingValues[st.coding]})
	st.encoder, st.held = enc, false
	x.respBody.SetFilter(st, resp)
}

// codedTag gives the ETag field etag the coding's suffix.
func (st *compressState) codedTag(etag *h1.Field) {
	start := len(st.buf)
	st.buf = compress.AppendETag(st.buf, etag.Value, st.coding)
	etag.Value = st.buf[start:]
}

// Filter compresses the backend's next bytes; the output of the call
// before has been taken by then. A call with more of the body already
// come leaves the encoder to fill its block; the others end with a flush
// (or, at the end, the coding's end), so that what the backend sent
// leaves before relay waits for it again. A flush per read would cost
// CPU and ratio: a body of 100 KB read 16 KiB at a time was 7 flushes.
func (st *compressState) Filter(p []byte, end, more bool) ([]byte, error) {
	e := st.encoder
	e.Consume(len(e.Output()))
	if len(p) > 0 {
		if _, err := e.Write(p); err != nil {
			return nil, err
		}
		st.held = true
	}
	var err error
	switch {
	case end:
		err = e.Close()
	case !more && st.held:
		err = e.Flush()
		st.held = false
	}
	return e.Output(), err
}

// compressionStats adds what the process's encoders are doing to st:
// they are the process's, whichever route or pool took them.
func compressionStats(st *stats.Process) {
	u := compress.Encoders()
	st.Compress.EncodersInUse += u.InUse
	st.Compress.OverBudget += u.OverBudget
}

// Release gives the encoder back to its pool.
func (st *compressState) Release() {
	if st.encoder != nil {
		st.encoder.Release()
		st.encoder = nil
	}
}

var (
	varyField            = h1.Field{Name: []byte("Vary"), Value: []byte("Accept-Encoding")}
	contentEncodingField = []byte("Content-Encoding")
	codingValues         = [...][]byte{
		compress.Identity: []byte("identity"),
		compress.Gzip:     []byte("gzip"),
		compress.Brotli:   []byte("br"),
		compress.Zstd:     []byte("zstd"),
	}
)

// isIdentity reports whether a Content-Encoding value says the body is
// not coded.
func isIdentity(v []byte) bool { return len(v) == 0 || equalFoldASCII(v, "identity") }

// isWeakTag reports whether an ETag value is weak (W/"..."), which may
// stand for every coding of a representation and stays as it is.
func isWeakTag(v []byte) bool { return len(v) >= 2 && v[0] == 'W' && v[1] == '/' }
