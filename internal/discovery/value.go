// Package discovery finds backends in etcd: each key under a prefix is one
// backend, its value a small JSON object. A Watcher lists the prefix,
// watches it and hands every change, as the whole discovered set, to the
// control, which makes it the membership of every process; Register keeps
// a key alive under a lease, so a backend that dies disappears.
package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"relay/internal/config"
)

// Backend is one discovered backend: the etcd key it came from and what
// its value says.
type Backend struct {
	Key    string
	URL    string // canonical, as config.BackendURL gives it
	Weight int
}

// Value is the JSON value of a backend's key:
//
//	{"url": "http://10.0.0.5:8080", "weight": 2}
//
// url is required (http or https, host and port); weight is optional,
// 1..config.MaxWeight, default 1. Any other field is refused, so a typo
// is not silently ignored.
type Value struct {
	URL    string `json:"url"`
	Weight *int   `json:"weight,omitempty"`
}

// maxValueBytes bounds a value relay reads; a backend's is tens of bytes.
const maxValueBytes = 4096

// Parse reads the value of key as a backend, or says what is wrong with it.
func Parse(key string, data []byte) (Backend, error) {
	bad := func(format string, args ...any) (Backend, error) {
		return Backend{}, fmt.Errorf("etcd key %q: "+format, append([]any{key}, args...)...)
	}
	if len(data) > maxValueBytes {
		return bad("value is %d bytes; a backend's is at most %d", len(data), maxValueBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v Value
	if err := dec.Decode(&v); err != nil {
		return bad(`value is not a backend (want {"url": "http://HOST:PORT", "weight": N}): %v`, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("value holds more than one JSON object")
	}
	if v.URL == "" {
		return bad(`value has no "url"`)
	}
	u, err := config.BackendURL(v.URL)
	if err != nil {
		return bad("url: %v", err)
	}
	weight := config.DefaultWeight
	if v.Weight != nil {
		weight = *v.Weight
	}
	if weight < 1 || weight > config.MaxWeight {
		return bad("weight %d is outside 1..%d (to take a backend out, delete its key)", weight, config.MaxWeight)
	}
	return Backend{Key: key, URL: u.String(), Weight: weight}, nil
}

// KeyFor is the key that announces the backend at url (canonical, as
// config.BackendURL gives it) under prefix: the prefix and the URL's
// HOST:PORT, so each address has one key.
func KeyFor(prefix, url string) string {
	_, hostport, _ := strings.Cut(url, "://")
	return prefix + hostport
}

// Marshal is the value that announces the backend at url with weight.
func Marshal(url string, weight int) []byte {
	b, _ := json.Marshal(Value{URL: url, Weight: &weight})
	return b
}
