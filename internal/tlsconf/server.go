// Package tlsconf builds the TLS settings of relay's two sides: the
// certificates its TLS listener serves, chosen by the name the client asks
// for and swapped whole on reload, and (for https backends) how relay
// verifies the servers it connects to.
package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"

	"relay/internal/config"
)

// ALPN protocols the listener offers, most preferred first.
var serverProtocols = []string{"h2", "http/1.1"}

// Server is the TLS side of relay's listener. Its Config reads the current
// certificate set on every handshake, so Reload changes what new
// connections get while connections already open keep theirs.
type Server struct {
	cur  atomic.Pointer[tls.Config]
	base *tls.Config
	// auth is the client certificate rules (clientauth.go); nil asks
	// no client for a certificate.
	auth atomic.Pointer[clientAuth]
}

// NewServer loads certs and returns a Server offering them with TLS
// minVersion ("1.2" or "1.3") or newer.
func NewServer(certs []config.Certificate, minVersion string) (*Server, error) {
	s := &Server{}
	s.base = &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: serverProtocols,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			// The certificate set, with the client certificate rule
			// of the name hello asks for (clientauth.go).
			return s.clientRuleFor(hello), nil
		},
	}
	if err := s.Reload(certs, minVersion); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload loads certs and, if every one of them loads, makes them the set
// new handshakes get. On any error the set in use stays and the error
// names every file that failed.
func (s *Server) Reload(certs []config.Certificate, minVersion string) error {
	if len(certs) == 0 {
		return errors.New("TLS needs at least one certificate")
	}
	var errs []error
	pairs := make([]tls.Certificate, 0, len(certs))
	for _, c := range certs {
		pair, err := config.LoadCertificate(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pairs = append(pairs, pair)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	min := config.TLSVersion(minVersion)
	if min == 0 {
		return errors.New("tls_min_version must be \"1.2\" or \"1.3\", got " + minVersion)
	}
	s.cur.Store(&tls.Config{
		// crypto/tls picks the first certificate whose names match the
		// client's SNI and whose key it can use, else the first.
		Certificates: pairs,
		MinVersion:   min,
		NextProtos:   serverProtocols,
		// Go's default cipher suites and curves; crypto/tls never
		// renegotiates as a server.
	})
	return nil
}

// SetTicketKeys makes keys, newest first, the keys that encrypt and
// decrypt session tickets, in place of keys of this process's own: relay's
// processes share them, so a client resumes on whichever process it
// reaches. No keys leaves the ones in use.
func (s *Server) SetTicketKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	ks := make([][32]byte, len(keys))
	for i, k := range keys {
		if len(k) != len(ks[i]) {
			return fmt.Errorf("session-ticket key %d has %d bytes, want %d", i, len(k), len(ks[i]))
		}
		copy(ks[i][:], k)
	}
	s.base.SetSessionTicketKeys(ks)
	return nil
}

// Config is the tls.Config to serve with. It stays the same value across
// reloads.
func (s *Server) Config() *tls.Config { return s.base }
