package h2

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/h1"
)

// view fills the stream's request view, which the core reads, from the
// request's decoded fields. A malformed request (RFC 9113 8.1.1, 8.2 and
// 8.3) gets the stream error it returns; one relay will not serve is
// answered with st.refuse. size is the list's size (listSize).
func (st *stream) view(f *http2.MetaHeadersFrame, size int64) http2.ErrCode {
	c := st.c
	req := &st.req
	*req = h1.Request{Fields: req.Fields[:0], Minor: 1}
	// The frame's field list is the connection's, reused for its next
	// block; the strings the request's fields are views of are their
	// own, kept alive by those views.
	st.head = f.PseudoValue("method") == "HEAD"
	if f.Truncated || size > int64(c.srv.lim.MaxHeaderBytes) {
		st.refuse, st.refuseText = 431, "request header fields too large"
		return http2.ErrCodeNo
	}
	var method, path, scheme, authority string
	cookies := 0
	length := int64(-1)
	fields := req.Fields
	for _, hf := range f.Fields {
		if untrimmed(hf.Value) {
			return http2.ErrCodeProtocol // RFC 9113 8.2.1
		}
		if hf.IsPseudo() {
			switch hf.Name {
			case ":method":
				method = hf.Value
			case ":path":
				path = hf.Value
			case ":scheme":
				scheme = hf.Value
			case ":authority":
				authority = hf.Value
			default:
				return http2.ErrCodeProtocol // :status, or :protocol, which relay does not offer
			}
			continue
		}
		if connectionSpecific(hf.Name, hf.Value) {
			return http2.ErrCodeProtocol // RFC 9113 8.2.2
		}
		hop := false
		switch hf.Name {
		case "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || length >= 0 && int64(n) != length {
				return http2.ErrCodeProtocol
			}
			length, hop = int64(n), true
		case "host":
			if authority == "" {
				authority = hf.Value
			}
			hop = true // Host is written from req.Host
		case "cookie":
			cookies++
		case "expect":
			req.Expect100 = strings.EqualFold(hf.Value, "100-continue")
			hop = true // answered by relay (Continue)
		}
		fields = append(fields, h1.Field{Name: bytesOf(hf.Name), Value: bytesOf(hf.Value), Hop: hop})
	}
	req.Fields = fields
	if method == "" || scheme == "" || path == "" {
		if method == "CONNECT" && scheme == "" && path == "" && authority != "" {
			st.refuse, st.refuseText = 405, "CONNECT is not supported"
			return http2.ErrCodeNo
		}
		return http2.ErrCodeProtocol // required pseudo-fields (RFC 9113 8.3.1)
	}
	if method == "CONNECT" {
		return http2.ErrCodeProtocol // CONNECT has no :scheme or :path
	}
	req.Method = bytesOf(method)
	req.Target = bytesOf(path)
	req.Host = bytesOf(authority)
	if err := req.CheckLine(); err != nil {
		// Its parts are what HTTP/1.1 carries to the backend: they
		// must make a well-formed request line and Host.
		var he *h1.Error
		if errors.As(err, &he) {
			st.refuse, st.refuseText = he.Status, he.Msg
		} else {
			st.refuse, st.refuseText = 400, err.Error()
		}
		return http2.ErrCodeNo
	}
	h1.MarkHopByHop(req.Fields)
	if cookies > 1 {
		st.joinCookies()
	}
	switch {
	case f.StreamEnded():
		if length > 0 {
			return http2.ErrCodeProtocol // a length with no body to match it
		}
		req.ContentLength = 0
	case length >= 0:
		req.ContentLength = length
	default:
		req.ContentLength, req.Chunked = -1, true
	}
	st.body.declared = length
	return http2.ErrCodeNo
}

// listSize is a header list's size as SETTINGS_MAX_HEADER_LIST_SIZE
// counts it: names, values and 32 bytes per field.
func listSize(fields []hpack.HeaderField) int {
	n := 0
	for i := range fields {
		n += int(fields[i].Size())
	}
	return n
}

// joinCookies makes the request's cookie fields one, joined by "; ", as
// HTTP/1.1 carries them (RFC 9113 8.2.3).
func (st *stream) joinCookies() {
	b := st.cookie[:0]
	first := -1
	for i := range st.req.Fields {
		f := &st.req.Fields[i]
		if !f.Is("cookie") {
			continue
		}
		if first < 0 {
			first = i
		} else {
			b = append(b, "; "...)
			f.Hop = true
		}
		b = append(b, f.Value...)
	}
	st.cookie = b
	st.req.Fields[first].Value = b
}

// bytesOf returns the bytes of s without copying them. The core only
// reads a request view's bytes (h1.Request), and a string's bytes never
// change, so the view may share them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf returns b as a string without copying it, for a string that
// does not outlive b's contents.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
