// Package tlsconf builds the TLS settings of relay's two sides: the
// certificates its TLS listener serves, chosen by the name the client asks
// for and swapped whole on reload, and (for https backends) how relay
// verifies the servers it connects to.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
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
	// managed, when not nil, are certificates relay orders itself
	// (ACME), served for names no file's certificate covers, and the
	// answer to a CA's TLS-ALPN-01 handshake.
	managed Managed
	// files are the leaves of the files' certificates, in order, for
	// matching names before the managed ones.
	files atomic.Pointer[[]*x509.Certificate]
	// auth is the client certificate rules (clientauth.go); nil asks
	// no client for a certificate.
	auth atomic.Pointer[clientAuth]
	// onDemand, when set, is asked for a certificate for a name
	// neither the files nor managed have one for (ondemand.go).
	onDemand atomic.Pointer[OnDemand]
}

// Managed are certificates relay orders itself (*acme.Serving).
type Managed interface {
	// Certificate is the certificate for name, or nil.
	Certificate(name string) *tls.Certificate
	// Default is the certificate for other names when there is no
	// file, or nil.
	Default() *tls.Certificate
	// ChallengeCertificate answers a CA's TLS-ALPN-01 handshake.
	ChallengeCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
}

// acmeTLS1 is the protocol of a CA's TLS-ALPN-01 validation (RFC 8737).
const acmeTLS1 = "acme-tls/1"

// NewServer loads certs and returns a Server offering them with TLS
// minVersion ("1.2" or "1.3") or newer.
func NewServer(certs []config.Certificate, minVersion string) (*Server, error) {
	return NewManagedServer(certs, minVersion, nil)
}

// NewManagedServer is NewServer with certificates relay orders itself
// beside the files' (which then may be none): a name a file's
// certificate covers gets the file's, any other name the managed one,
// and a handshake that offers only acme-tls/1 gets its challenge's.
func NewManagedServer(certs []config.Certificate, minVersion string, managed Managed) (*Server, error) {
	s := &Server{managed: managed}
	s.base = &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: serverProtocols,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if s.managed != nil && isACMEChallenge(hello) {
				return s.challenge(hello)
			}
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
	if len(certs) == 0 && s.managed == nil {
		return errors.New("TLS needs at least one certificate")
	}
	var errs []error
	pairs := make([]tls.Certificate, 0, len(certs))
	leaves := make([]*x509.Certificate, 0, len(certs))
	for _, c := range certs {
		pair, err := config.LoadCertificate(c)
		if err == nil {
			pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0])
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pairs = append(pairs, pair)
		leaves = append(leaves, pair.Leaf)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	min := config.TLSVersion(minVersion)
	if min == 0 {
		return errors.New("tls_min_version must be \"1.2\" or \"1.3\", got " + minVersion)
	}
	next := &tls.Config{
		// crypto/tls picks the first certificate whose names match the
		// client's SNI and whose key it can use, else the first.
		Certificates: pairs,
		MinVersion:   min,
		NextProtos:   serverProtocols,
		// Go's default cipher suites and curves; crypto/tls never
		// renegotiates as a server.
	}
	if s.managed != nil {
		next.GetCertificate = s.certificate
	}
	s.files.Store(&leaves)
	s.cur.Store(next)
	return nil
}

// certificate picks, with managed certificates beside the files', the
// certificate for a handshake: a file's whose names cover the SNI name,
// else the managed one for it, else one obtained on demand (ondemand.go),
// else (nil) crypto/tls's choice among the files', the first by default.
// Without a file, other names get the managed default, the first listed
// name's; without that either, the handshake fails naming the name.
func (s *Server) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName != "" {
		for _, leaf := range *s.files.Load() {
			if leaf.VerifyHostname(hello.ServerName) == nil {
				return nil, nil
			}
		}
		if c := s.managed.Certificate(hello.ServerName); c != nil {
			return c, nil
		}
		if c := s.demanded(hello); c != nil {
			return c, nil
		}
	}
	if len(*s.files.Load()) == 0 {
		if c := s.managed.Default(); c != nil {
			return c, nil
		}
		return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
	}
	return nil, nil
}

// challenge is the configuration of a CA's TLS-ALPN-01 handshake: the
// challenge's certificate and acme-tls/1 alone (RFC 8737 section 3).
func (s *Server) challenge(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	cert, err := s.managed.ChallengeCertificate(hello)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{acmeTLS1}, MinVersion: tls.VersionTLS12}, nil
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
