package core

import (
	"bytes"

	"relay/internal/balance"
)

// hashKey is the request's hash key for the hashing algorithms: a hash of
// what k names. A request without it (no such header, cookie or query
// parameter, or an empty value) gets its client's hash instead, so it
// still lands on one backend and stays there, as ip-hash would place it;
// hashing nothing would send every such request to one backend, and a
// random pick would scatter a client's requests.
//
// The value is hashed where it lies in the request head: no copy, no
// allocation.
func (x *Exchange) hashKey(c *Core, k balance.KeySpec) uint64 {
	var v []byte
	switch k.Source {
	case balance.FromHeader:
		v = x.headerValue(k.Name)
	case balance.FromCookie:
		v = x.cookieValue(k.Name)
	case balance.FromQuery:
		v = queryValue(x.Req.Target, k.Name)
	case balance.FromPath:
		v = x.Req.Target
		if i := bytes.IndexByte(v, '?'); i >= 0 {
			v = v[:i]
		}
	}
	if len(v) == 0 {
		return x.clientHash(c)
	}
	return balance.HashKey(v)
}

// headerValue returns the value of the first header field named name.
func (x *Exchange) headerValue(name string) []byte {
	fields := x.Req.Fields
	for i := range fields {
		if fields[i].Is(name) {
			return fields[i].Value
		}
	}
	return nil
}

// cookieValue returns the value of the first cookie named name (names are
// case-sensitive, RFC 6265 section 5.4). HTTP/2 clients may split the
// Cookie header into one field per cookie, so every Cookie field is read.
func (x *Exchange) cookieValue(name string) []byte {
	fields := x.Req.Fields
	for i := range fields {
		if !fields[i].Is("cookie") {
			continue
		}
		if v, ok := pairValue(fields[i].Value, ';', name, true); ok {
			return v
		}
	}
	return nil
}

// queryValue returns the raw value of the first query parameter of target
// named name, as the client wrote it (not percent-decoded).
func queryValue(target []byte, name string) []byte {
	i := bytes.IndexByte(target, '?')
	if i < 0 {
		return nil
	}
	v, _ := pairValue(target[i+1:], '&', name, false)
	return v
}

// pairValue finds name=value in a list of pairs separated by sep, trimming
// spaces around each pair when trim is set, and returns value.
func pairValue(list []byte, sep byte, name string, trim bool) ([]byte, bool) {
	for len(list) > 0 {
		var pair []byte
		if j := bytes.IndexByte(list, sep); j >= 0 {
			pair, list = list[:j], list[j+1:]
		} else {
			pair, list = list, nil
		}
		if trim {
			pair = bytes.TrimSpace(pair)
		}
		if len(pair) > len(name) && pair[len(name)] == '=' && string(pair[:len(name)]) == name {
			return pair[len(name)+1:], true
		}
	}
	return nil, false
}
