package compress

import (
	"bytes"
	"errors"
	"strings"
)

// A pattern is one entry of Config.Types or Config.ExcludeTypes,
// lower-cased: typ/sub, typ/* (sub "*"), typ/*+suffix (sub "*", suffix
// set), */*+suffix or */*.
type pattern struct {
	typ, sub, suffix string
}

func (p pattern) String() string {
	if p.suffix != "" {
		return p.typ + "/*+" + p.suffix
	}
	return p.typ + "/" + p.sub
}

var errPatternForm = errors.New("is not a media type pattern: TYPE/SUBTYPE, TYPE/*, TYPE/*+SUFFIX, */*+SUFFIX or */*")

// parsePattern reads a type pattern, case-insensitively as media types
// compare (RFC 9110 8.3.1).
func parsePattern(s string) (pattern, error) {
	if strings.IndexByte(s, ';') >= 0 {
		return pattern{}, errors.New("has parameters; types are matched without them, so give the media type alone")
	}
	s = strings.ToLower(s)
	typ, sub, ok := strings.Cut(s, "/")
	if !ok || typ == "" || sub == "" || strings.IndexByte(sub, '/') >= 0 {
		return pattern{}, errPatternForm
	}
	if typ != "*" && !isName(typ) {
		return pattern{}, errPatternForm
	}
	switch {
	case sub == "*":
		return pattern{typ: typ, sub: "*"}, nil
	case strings.HasPrefix(sub, "*+"):
		if !isName(sub[2:]) {
			return pattern{}, errPatternForm
		}
		return pattern{typ: typ, sub: "*", suffix: sub[2:]}, nil
	case !isName(sub):
		if strings.IndexByte(sub, '*') >= 0 {
			return pattern{}, errors.New("has a '*' that stands for part of a name; it stands only for a whole type or subtype, or before +SUFFIX")
		}
		return pattern{}, errPatternForm
	case typ == "*":
		return pattern{}, errors.New("has a wildcard type with a named subtype; use */* or */*+SUFFIX")
	}
	return pattern{typ: typ, sub: sub}, nil
}

// isName reports whether s is a non-empty token of media type name
// characters (RFC 9110's tchar, less the '*' patterns reserve).
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) || s[i] == '*' {
			return false
		}
	}
	return true
}

// isTchar reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// typeSet is a list of patterns compiled for lookups that allocate
// nothing: a map indexed by string(b) of a []byte does not copy b.
type typeSet struct {
	all      bool                // */*
	exact    map[string]struct{} // "text/html"
	types    map[string]struct{} // "text" of text/*
	suffixes map[string][]string // "json" of application/*+json and */*+json: "application", "*"
}

func newTypeSet(list []string) (typeSet, error) {
	s := typeSet{
		exact:    make(map[string]struct{}),
		types:    make(map[string]struct{}),
		suffixes: make(map[string][]string),
	}
	for _, entry := range list {
		p, err := parsePattern(entry)
		if err != nil {
			return typeSet{}, err
		}
		switch {
		case p.suffix != "":
			s.suffixes[p.suffix] = append(s.suffixes[p.suffix], p.typ)
		case p.typ == "*":
			s.all = true
		case p.sub == "*":
			s.types[p.typ] = struct{}{}
		default:
			s.exact[p.typ+"/"+p.sub] = struct{}{}
		}
	}
	return s, nil
}

// match reports whether the lower-cased media type mt, whose '/' is at
// slash, is in s.
func (s *typeSet) match(mt []byte, slash int) bool {
	if s.all {
		return true
	}
	if _, ok := s.exact[string(mt)]; ok {
		return true
	}
	typ, sub := mt[:slash], mt[slash+1:]
	if _, ok := s.types[string(typ)]; ok {
		return true
	}
	if plus := bytes.LastIndexByte(sub, '+'); plus >= 0 {
		for _, t := range s.suffixes[string(sub[plus+1:])] {
			if t == "*" || t == string(typ) {
				return true
			}
		}
	}
	return false
}

// maxMediaType is the longest media type Compressible reads: RFC 6838
// 4.2 gives type and subtype names 127 characters each.
const maxMediaType = 127 + 1 + 127

// mediaType copies the media type of a Content-Type value into buf,
// lower-cased and without its parameters, and returns it with the place
// of its '/'; ok is false for a value that holds no valid media type.
func mediaType(buf *[maxMediaType]byte, value []byte) (mt []byte, slash int, ok bool) {
	i := 0
	for i < len(value) && (value[i] == ' ' || value[i] == '\t') {
		i++
	}
	n := 0
	slash = -1
	for ; i < len(value); i++ {
		c := value[i]
		if c == ';' || c == ' ' || c == '\t' {
			break
		}
		if c == '/' {
			if slash >= 0 {
				return nil, 0, false
			}
			slash = n
		} else if !isTchar(c) {
			return nil, 0, false
		}
		if n == len(buf) {
			return nil, 0, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	// Only whitespace or parameters may follow the media type.
	for ; i < len(value) && value[i] != ';'; i++ {
		if value[i] != ' ' && value[i] != '\t' {
			return nil, 0, false
		}
	}
	if slash <= 0 || slash == n-1 {
		return nil, 0, false
	}
	return buf[:n], slash, true
}

// Compressible reports whether a response with this Content-Type field
// value and Content-Length (-1 when unknown: chunked, HTTP/2 without the
// field, or read to the connection's end) may be compressed: its media
// type (parameters and case ignored) is in Types and not in
// ExcludeTypes, and its length, when known, is at least MinLength. A
// response without a valid Content-Type is not compressed: it may be
// anything, compressed data included.
//
// text/event-stream is never compressible, whatever Types say: a
// server-sent event must reach the client the moment the backend sends
// it, and a compressor holds bytes back until its next flush. A core
// that flushed after every read could compress it, but one event per
// flush gains almost nothing, and clients' EventSource implementations
// are where a coding least often works.
//
// Compressible allocates nothing.
func (p *Policy) Compressible(contentType []byte, length int64) bool {
	if length >= 0 && length < p.minLength {
		return false
	}
	var buf [maxMediaType]byte
	mt, slash, ok := mediaType(&buf, contentType)
	if !ok {
		return false
	}
	if string(mt) == "text/event-stream" {
		return false
	}
	if p.exclude.match(mt, slash) {
		return false
	}
	return p.types.match(mt, slash)
}
