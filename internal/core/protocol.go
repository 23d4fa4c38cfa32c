package core

import (
	"fmt"

	"relay/internal/backend"
)

// Protocol is the protocol relay speaks to a backend.
type Protocol uint8

const (
	// HTTP1 is HTTP/1.1, over TLS for an https backend: the default.
	HTTP1 Protocol = iota
	// H2 is HTTP/2 over TLS, negotiated by ALPN, to an https backend.
	H2
	// H2C is HTTP/2 over cleartext TCP with prior knowledge, to an http
	// backend.
	H2C
)

// String returns the protocol's name in the configuration.
func (p Protocol) String() string {
	switch p {
	case HTTP1:
		return "http/1.1"
	case H2:
		return "h2"
	case H2C:
		return "h2c"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol returns the protocol a configuration names: "http/1.1"
// (or ""), "h2" or "h2c".
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "", "http/1.1":
		return HTTP1, nil
	case "h2":
		return H2, nil
	case "h2c":
		return H2C, nil
	}
	return HTTP1, fmt.Errorf("protocol %q is not http/1.1, h2 or h2c", s)
}

// protocolOf returns the protocol relay speaks to the pool's member b.
func (s *settings) protocolOf(b *backend.Backend) Protocol {
	if len(s.BackendProtocols) > 0 {
		if proto, ok := s.BackendProtocols[b.Name]; ok {
			return proto
		}
	}
	return s.Protocol
}
