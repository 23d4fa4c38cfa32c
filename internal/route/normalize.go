package route

import "bytes"

// appendNormal appends the normal form of the path p (which must start
// with "/") to out; the package doc gives the rule. On an error out is
// returned as it was.
func appendNormal(out, p []byte, mode EscapedSlashes) ([]byte, error) {
	if len(p) == 0 || p[0] != '/' {
		return out, ErrTarget
	}
	base := len(out)
	out = append(out, '/')
	seg := len(out) // where the current segment's text starts
	for i := 1; i < len(p); i++ {
		// Most bytes are copied as they are: take them a run at a time.
		j := i
		for j < len(p) && pathByte[p[j]] {
			j++
		}
		out = append(out, p[i:j]...)
		if i = j; i == len(p) {
			break
		}
		c := p[i]
		sep := false
		switch c {
		case '/':
			sep = true
		case '%':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return out[:base], ErrEscape
			}
			v := unhex(p[i+1])<<4 | unhex(p[i+2])
			i += 2
			switch {
			case unreserved[v]:
				out = append(out, v)
			case v == '/' || v == '\\':
				switch mode {
				case Reject:
					return out[:base], ErrEscapedSlash
				case Decode:
					sep = true
				default:
					out = appendEscape(out, v)
				}
			default:
				out = appendEscape(out, v)
			}
		case '\\':
			switch mode {
			case Reject:
				return out[:base], ErrEscapedSlash
			case Decode:
				sep = true
			default:
				out = append(out, c)
			}
		default:
			out = appendEscape(out, c)
		}
		if sep {
			out = endSegment(out, base, seg, false)
			seg = len(out)
		}
	}
	return endSegment(out, base, seg, true), nil
}

// endSegment finishes the segment that starts at out[seg] (out[seg-1] is
// its "/"): a "." is dropped, a ".." drops itself and the segment before
// it (never the root), an empty one (repeated slash) is merged. Unless the
// segment is the last one, out ends in "/" afterwards, ready for the next.
func endSegment(out []byte, base, seg int, last bool) []byte {
	s := out[seg:]
	switch {
	case len(s) == 0:
	case len(s) == 1 && s[0] == '.':
		out = out[:seg]
	case len(s) == 2 && s[0] == '.' && s[1] == '.':
		out = out[:seg-1]
		if j := bytes.LastIndexByte(out[base:], '/'); j >= 0 {
			out = out[:base+j+1]
		} else {
			out = append(out, '/')
		}
	default:
		if !last {
			out = append(out, '/')
		}
	}
	return out
}

const upperHex = "0123456789ABCDEF"

func appendEscape(out []byte, c byte) []byte {
	return append(out, '%', upperHex[c>>4], upperHex[c&15])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unreserved marks ALPHA DIGIT "-" "." "_" "~" (RFC 3986 section 2.3):
// their escapes mean the same as the characters, so they are decoded.
// pathByte marks what a path segment may hold besides escapes: unreserved,
// sub-delims, ":" and "@" (RFC 3986 section 3.3).
var (
	unreserved = byteSet("-._~")
	pathByte   = byteSet("-._~!$&'()*+,;=:@")
)

// byteSet marks ALPHA, DIGIT and the bytes of extra.
func byteSet(extra string) (set [256]bool) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		set[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
	}
	for i := 0; i < len(extra); i++ {
		set[extra[i]] = true
	}
	return set
}

// hasSegmentPrefix reports whether path p lies under prefix: equal, or
// continuing with a new segment. A prefix ending in "/" already ends on a
// segment boundary.
func hasSegmentPrefix(p []byte, prefix string) bool {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return false
	}
	return len(p) == len(prefix) || prefix[len(prefix)-1] == '/' || p[len(prefix)] == '/'
}
