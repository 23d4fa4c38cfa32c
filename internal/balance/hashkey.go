package balance

import (
	"fmt"
	"strings"
)

// KeySource says which part of a request a hashing algorithm hashes.
type KeySource uint8

// The sources a hash key may come from.
const (
	// FromClient hashes the client address (after trusted proxies).
	FromClient KeySource = iota
	// FromHeader hashes the value of the request header KeySpec.Name.
	FromHeader
	// FromCookie hashes the value of the cookie KeySpec.Name.
	FromCookie
	// FromQuery hashes the raw (undecoded) value of the query parameter
	// KeySpec.Name.
	FromQuery
	// FromPath hashes the request path, without its query.
	FromPath
)

// KeySpec is a parsed hash_key setting: what of a request the hashing
// algorithms hash. The zero value hashes the client address.
type KeySpec struct {
	Source KeySource
	// Name is the header, cookie or query parameter; "" for the client
	// address and the path. A header name is kept lower case.
	Name string
}

// ParseKeySpec parses a hash_key setting: "client" (or ""), "path",
// "header:NAME", "cookie:NAME" or "query:NAME".
func ParseKeySpec(s string) (KeySpec, error) {
	switch s {
	case "", "client":
		return KeySpec{}, nil
	case "path":
		return KeySpec{Source: FromPath}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	var k KeySpec
	switch kind {
	case "header":
		k.Source, name = FromHeader, strings.ToLower(name)
	case "cookie":
		k.Source = FromCookie
	case "query":
		k.Source = FromQuery
	default:
		return KeySpec{}, fmt.Errorf("unknown hash key %q (known: client, path, header:NAME, cookie:NAME, query:NAME)", s)
	}
	if !ok || name == "" {
		return KeySpec{}, fmt.Errorf("hash key %q needs a name: %s:NAME", s, kind)
	}
	k.Name = name
	return k, nil
}

// String gives the setting k was parsed from.
func (k KeySpec) String() string {
	switch k.Source {
	case FromHeader:
		return "header:" + k.Name
	case FromCookie:
		return "cookie:" + k.Name
	case FromQuery:
		return "query:" + k.Name
	case FromPath:
		return "path"
	}
	return "client"
}
