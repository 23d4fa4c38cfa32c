package compress

import "bytes"

// A compressed response is another representation of its resource, so it
// must not share the backend's strong entity-tag (RFC 9110 8.8.3.3): a
// cache or a client sending Range or If-Match would take one
// representation's bytes for the other's. relay gives a strong tag a
// suffix inside its quotes, "abc" becoming "abc-gzip", as Caddy does,
// and takes it off again in the conditional fields of requests before
// they go to the backend, which knows only "abc": revalidation still
// gets its 304.
//
// A weak tag is left as it is. It claims only that representations are
// equivalent in meaning, which an uncompressed body and its compressed
// form are, and weak comparison (If-None-Match) is all it serves; a 304
// for it lets a cache reuse whichever representation it stored, since
// Vary: Accept-Encoding has already told the cache which one fits the
// request. nginx instead weakens a strong tag when it compresses; that
// keeps the tag from lying but throws away If-Match and If-Range for
// every compressed response, where a suffix keeps them working.

// AppendETag appends to dst the ETag field value etag as it goes out on
// a response compressed with e: a strong tag with e's suffix inside its
// quotes ("abc" -> "abc-gzip"), anything else (a weak tag, Identity, a
// value that is not an entity-tag) unchanged. The core applies it to a
// 304 of a compressed representation too, so that the client's stored
// tag stays the one it has.
func AppendETag(dst, etag []byte, e Encoding) []byte {
	tag := trimOWS(etag)
	suffix := e.Token()
	if suffix == "" || len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"' ||
		bytes.IndexByte(tag[1:len(tag)-1], '"') >= 0 {
		return append(dst, etag...)
	}
	dst = append(dst, tag[:len(tag)-1]...)
	dst = append(dst, '-')
	dst = append(dst, suffix...)
	return append(dst, '"')
}

// StripETags appends to dst the list of entity-tags value (an
// If-None-Match or If-Match field value: "*", or tags weak and strong
// separated by commas) with e's suffix (-gzip, -br or -zstd) taken off
// every tag that ends in it, and reports whether it took any off, so
// that the core rewrites the field only when it must. e is the coding
// the response would have now: a tag another coding made stays as it
// is, does not match the backend's, and the client gets the response in
// full in the coding it now accepts, not a 304 for a copy it should no
// longer use; with Identity nothing is taken off. Weak tags are
// stripped too: relay never makes a weak tag with a suffix, but a cache
// between relay and the client may weaken the strong one it got, as
// nginx does when it compresses. Everything else in value, spacing and
// malformed members included, is copied as it is.
//
// A backend tag of its own that ends in "-gzip", "-br" or "-zstd" loses
// that ending in conditional requests; relay cannot tell it from its own
// suffix. Such a backend sees a request that does not match and answers
// in full, which costs bytes, never correctness.
func StripETags(dst, value []byte, e Encoding) ([]byte, bool) {
	if e.Token() == "" {
		return append(dst, value...), false
	}
	changed := false
	for {
		open := bytes.IndexByte(value, '"')
		if open < 0 {
			return append(dst, value...), changed
		}
		end := bytes.IndexByte(value[open+1:], '"')
		if end < 0 {
			return append(dst, value...), changed // an unterminated tag: left as it is
		}
		end += open + 1
		opaque := value[open+1 : end]
		if n := suffixLen(opaque, e); n > 0 {
			dst = append(dst, value[:open+1]...)
			dst = append(dst, opaque[:len(opaque)-n]...)
			changed = true
		} else {
			dst = append(dst, value[:end]...)
		}
		dst = append(dst, '"')
		value = value[end+1:]
	}
}

// suffixLen returns the length of e's suffix at the end of an
// entity-tag's opaque part, 0 when there is none. "-gzip" alone is
// one: AppendETag makes it of the empty tag "".
func suffixLen(opaque []byte, e Encoding) int {
	tok := e.Token()
	n := len(tok) + 1
	if len(opaque) >= n && opaque[len(opaque)-n] == '-' && string(opaque[len(opaque)-len(tok):]) == tok {
		return n
	}
	return 0
}
