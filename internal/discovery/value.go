// Package discovery finds backends in etcd: each key under a prefix is one
// backend of one pool, its value a small JSON object. A Watcher lists the prefix,
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
// its value says. One URL may be a backend of several pools, each under
// its own key.
type Backend struct {
	Key    string
	Pool   string // the pool it serves in; config.DefaultPool when the value names none
	URL    string // canonical, as config.BackendURL gives it
	Weight int
}

// Value is the JSON value of a backend's key:
//
//	{"url": "http://10.0.0.5:8080", "weight": 2, "pool": "api"}
//
// url is required (http or https, host and port); weight is optional,
// 1..config.MaxWeight, default 1; pool is optional, a pool name as
// config.CheckPoolName allows, default config.DefaultPool. Any other
// field is refused, so a typo is not silently ignored.
type Value struct {
	URL    string  `json:"url"`
	Weight *int    `json:"weight,omitempty"`
	Pool   *string `json:"pool,omitempty"`
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
		return bad(`value is not a backend (want {"url": "http://HOST:PORT", "weight": N, "pool": "NAME"}): %v`, err)
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
	pool := config.DefaultPool
	if v.Pool != nil {
		// Present but empty is a mistake, not the default: the field is
		// left out for that.
		if *v.Pool == "" {
			return bad(`pool is empty; leave the field out for the pool %q`, config.DefaultPool)
		}
		if err := config.CheckPoolName(*v.Pool); err != nil {
			return bad("pool: %v", err)
		}
		pool = *v.Pool
	}
	return Backend{Key: key, Pool: pool, URL: u.String(), Weight: weight}, nil
}

// KeyFor is the key that announces the backend at url (canonical, as
// config.BackendURL gives it) under prefix: the prefix and the URL's
// HOST:PORT, so each address has one key.
func KeyFor(prefix, url string) string {
	_, hostport, _ := strings.Cut(url, "://")
	return prefix + hostport
}

// PoolKeyFor is the key that announces the backend at url in pool under
// prefix: KeyFor's for config.DefaultPool, and PREFIX POOL/HOST:PORT for
// any other, so one address can be announced in several pools without
// one key overwriting another. relay reads the pool from the value, not
// from the key; this layout only keeps keys apart and readable.
func PoolKeyFor(prefix, pool, url string) string {
	if pool == config.DefaultPool {
		return KeyFor(prefix, url)
	}
	return KeyFor(prefix+pool+"/", url)
}

// Marshal is the value that announces the backend at url with weight, in
// the pool config.DefaultPool.
func Marshal(url string, weight int) []byte {
	return MarshalPool(url, weight, config.DefaultPool)
}

// MarshalPool is the value that announces the backend at url with weight
// in pool. The pool field is left out for config.DefaultPool, so such a
// value reads the same as one written before pools existed.
func MarshalPool(url string, weight int, pool string) []byte {
	v := Value{URL: url, Weight: &weight}
	if pool != config.DefaultPool {
		v.Pool = &pool
	}
	b, _ := json.Marshal(v)
	return b
}
