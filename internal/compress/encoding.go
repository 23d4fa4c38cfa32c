package compress

import (
	"fmt"
	"strings"
)

// Encoding is a content coding relay can produce, named in a response's
// Content-Encoding by its Token.
type Encoding uint8

const (
	// Identity is no content coding: the body goes as the backend sent it.
	Identity Encoding = iota
	// Gzip is the gzip format (RFC 1952), which every client decodes.
	Gzip
	// Brotli is br (RFC 7932), denser than gzip on text at a similar cost.
	Brotli
	// Zstd is zstd (RFC 8878), the fastest of the three for its ratio.
	Zstd

	numEncodings = iota
)

var tokens = [numEncodings]string{Identity: "", Gzip: "gzip", Brotli: "br", Zstd: "zstd"}

// Token is e's name in Content-Encoding and Accept-Encoding: "gzip", "br",
// "zstd", and "" for Identity, which a response never names.
func (e Encoding) Token() string {
	if int(e) < len(tokens) {
		return tokens[e]
	}
	return ""
}

// String is e's name in configuration and logs: its Token, or
// "identity".
func (e Encoding) String() string {
	if e == Identity {
		return "identity"
	}
	if int(e) < len(tokens) {
		return tokens[e]
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// ParseEncoding reads a content coding's name, case-insensitively as HTTP
// compares them: "gzip" (and "x-gzip", its old alias, RFC 9110 8.4.1.3),
// "br", "zstd" or "identity".
func ParseEncoding(s string) (Encoding, error) {
	switch {
	case strings.EqualFold(s, "gzip"), strings.EqualFold(s, "x-gzip"):
		return Gzip, nil
	case strings.EqualFold(s, "br"):
		return Brotli, nil
	case strings.EqualFold(s, "zstd"):
		return Zstd, nil
	case strings.EqualFold(s, "identity"):
		return Identity, nil
	}
	return Identity, fmt.Errorf("unknown encoding %q (relay produces zstd, br and gzip)", s)
}
