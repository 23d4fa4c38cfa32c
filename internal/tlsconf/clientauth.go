package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/config"
)

// Client certificates at the listener (client_auth): each rule of the
// configuration becomes a tls.Config, the certificate set's own with the
// rule's ClientAuth, CAs and checks, which GetConfigForClient picks by the
// ClientHello's name (clientRuleFor). A rule's checks beyond crypto/tls's
// chain and expiry are its CRLs and its allow list, in VerifyConnection.

// crlCheckEvery is how often, at most, a handshake looks at a rule's CRL
// files for a change on disk (mtime or size); a changed file is read
// again without a reload. Tests shorten it.
var crlCheckEvery = 2 * time.Second

// clientAuth is the listener's set of client certificate rules, swapped
// whole by SetClientAuth.
type clientAuth struct {
	hosts *config.ClientAuthHosts
	rules []*clientRule
}

// clientRule is one client_auth rule, ready for handshakes.
type clientRule struct {
	mode  string
	auth  tls.ClientAuthType
	pool  *x509.CertPool // nil without ca_files
	cas   []*x509.Certificate
	crls  *crlSet // nil without crl_files
	allow config.ClientAllow
	// derived is the tls.Config of the rule over the certificate set it
	// was made from, made again when the set changes.
	derived atomic.Pointer[derivedConfig]
}

type derivedConfig struct {
	base, cfg *tls.Config
}

// SetClientAuth loads rules' files and, when all of them load, makes the
// rules those new handshakes get; on any error the rules in use stay and
// the error names every file that failed. log receives what a CRL file
// changed on disk does (read again, or refused and the last one kept).
func (s *Server) SetClientAuth(rules []config.ClientAuthRule, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &clientAuth{hosts: config.NewClientAuthHosts(rules)}
	var errs []error
	for i := range rules {
		r, err := newClientRule(&rules[i], log)
		if err != nil {
			errs = append(errs, fmt.Errorf("client_auth[%d]: %w", i, err))
			continue
		}
		a.rules = append(a.rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(rules) == 0 {
		a = nil
	}
	s.auth.Store(a)
	return nil
}

func newClientRule(cr *config.ClientAuthRule, log *slog.Logger) (*clientRule, error) {
	r := &clientRule{mode: cr.Mode, allow: cr.Allow}
	switch cr.Mode {
	case "", config.ClientAuthNone:
		r.auth = tls.NoClientCert
	case config.ClientAuthRequest:
		// Verified by hand (Verified), so that a certificate that fails
		// never fails the handshake.
		r.auth = tls.RequestClientCert
	case config.ClientAuthRequire:
		r.auth = tls.RequireAndVerifyClientCert
	case config.ClientAuthVerifyIfGiven:
		r.auth = tls.VerifyClientCertIfGiven
	default:
		return nil, fmt.Errorf("mode %q is not one of %s", cr.Mode, strings.Join(config.ClientAuthModes, ", "))
	}
	var errs []error
	for _, f := range cr.CAFiles {
		certs, err := config.LoadCACerts(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.cas = append(r.cas, certs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(r.cas) > 0 {
		r.pool = x509.NewCertPool()
		for _, c := range r.cas {
			r.pool.AddCert(c)
		}
	}
	if r.auth >= tls.VerifyClientCertIfGiven && r.pool == nil {
		return nil, fmt.Errorf("mode %s needs ca_files", cr.Mode)
	}
	if len(cr.CRLFiles) > 0 {
		r.crls = &crlSet{files: cr.CRLFiles, cas: r.cas, log: log}
		if err := r.crls.load(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// clientRuleFor is the configuration of the handshake hello starts:
// the certificate set's, with the client certificate rule of the name the
// client asks for.
func (s *Server) clientRuleFor(hello *tls.ClientHelloInfo) *tls.Config {
	cur := s.cur.Load()
	a := s.auth.Load()
	// An ACME TLS-ALPN-01 challenge (RFC 8737: a ClientHello offering
	// only "acme-tls/1") is answered with the challenge certificate and
	// must never be asked for a client certificate: the hook that
	// answers it runs before this, and this check keeps it so whatever
	// the order.
	if a == nil || isACMEChallenge(hello) {
		return cur
	}
	i := a.hosts.RuleOf(hello.ServerName)
	if i < 0 {
		return cur
	}
	return a.rules[i].config(cur)
}

// isACMEChallenge reports whether hello is a TLS-ALPN-01 challenge: it
// offers acme-tls/1.
func isACMEChallenge(hello *tls.ClientHelloInfo) bool {
	return slices.Contains(hello.SupportedProtos, acmeTLS1)
}

// config returns the rule's tls.Config over base, the certificate set in
// use.
func (r *clientRule) config(base *tls.Config) *tls.Config {
	if d := r.derived.Load(); d != nil && d.base == base {
		return d.cfg
	}
	if r.auth == tls.NoClientCert {
		return base
	}
	c := base.Clone()
	c.ClientAuth = r.auth
	if r.auth >= tls.VerifyClientCertIfGiven {
		c.ClientCAs = r.pool
	}
	c.VerifyConnection = r.verifyConnection
	r.derived.Store(&derivedConfig{base: base, cfg: c})
	return c
}

// verifyConnection refuses, with a bad_certificate alert, a handshake
// whose certificate crypto/tls verified but that a CRL revokes or the
// allow list does not take. A resumed session's chain is verified again
// against this rule's CAs: a ticket issued under another rule must not
// carry its verification here. Mode request verifies in Verified, after
// the handshake, and refuses nothing here.
func (r *clientRule) verifyConnection(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 || r.auth < tls.VerifyClientCertIfGiven {
		return nil
	}
	chains := cs.VerifiedChains
	if cs.DidResume || len(chains) == 0 {
		var err error
		if chains, err = r.verifyChain(cs.PeerCertificates, time.Now()); err != nil {
			return err
		}
	}
	return r.check(chains)
}

// verifyChain verifies certs (leaf first) against the rule's CAs, for
// client authentication, at now.
func (r *clientRule) verifyChain(certs []*x509.Certificate, now time.Time) ([][]*x509.Certificate, error) {
	if r.pool == nil {
		return nil, errors.New("no CA to verify the client certificate with")
	}
	opts := x509.VerifyOptions{Roots: r.pool, CurrentTime: now, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	return certs[0].Verify(opts)
}

// check applies the CRLs and the allow list to a verified chain.
func (r *clientRule) check(chains [][]*x509.Certificate) error {
	if len(chains) == 0 {
		return errors.New("client certificate not verified")
	}
	if r.crls != nil {
		set := r.crls.current()
		for _, chain := range chains {
			for _, c := range chain {
				if set.revoked(c) {
					return fmt.Errorf("client certificate %s (serial %x) is revoked", c.Subject, c.SerialNumber)
				}
			}
		}
	}
	if !allowed(r.allow, chains[0][0]) {
		return fmt.Errorf("client certificate %s is not on the allow list", chains[0][0].Subject)
	}
	return nil
}

// allowed reports whether leaf matches one entry of a.
func allowed(a config.ClientAllow, leaf *x509.Certificate) bool {
	if a.Empty() {
		return true
	}
	subject := leaf.Subject.String()
	for _, s := range a.Subjects {
		if s == subject {
			return true
		}
	}
	for _, want := range a.DNS {
		for _, n := range leaf.DNSNames {
			if strings.EqualFold(n, want) {
				return true
			}
		}
	}
	for _, want := range a.URI {
		prefix, wild := strings.CutSuffix(want, "*")
		for _, u := range leaf.URIs {
			if got := u.String(); got == want || wild && strings.HasPrefix(got, prefix) {
				return true
			}
		}
	}
	return false
}

// Verified returns the verified chains of a client connection's
// certificate, nil when it has none or none verified: crypto/tls's (its
// rule's CRLs and allow list passed in the handshake), or, for a rule of
// mode request with ca_files, the chains its checks give now. The front
// doors call it once per connection (core.Core.SetClientVerifier).
func (s *Server) Verified(cs *tls.ConnectionState) [][]*x509.Certificate {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	a := s.auth.Load()
	if a == nil {
		return nil
	}
	i := a.hosts.RuleOf(cs.ServerName)
	if i < 0 {
		return nil
	}
	r := a.rules[i]
	switch {
	case r.auth >= tls.VerifyClientCertIfGiven:
		if len(cs.VerifiedChains) > 0 && !cs.DidResume {
			return cs.VerifiedChains
		}
	case r.auth != tls.RequestClientCert || r.pool == nil:
		return nil
	}
	chains, err := r.verifyChain(cs.PeerCertificates, time.Now())
	if err != nil || r.check(chains) != nil {
		return nil
	}
	return chains
}

// crlSet is a rule's revocation lists, read again when a file changes.
type crlSet struct {
	files []string
	cas   []*x509.Certificate
	log   *slog.Logger

	cur     atomic.Pointer[revocations]
	checked atomic.Int64 // unix nanoseconds of the last look at the files
	mu      sync.Mutex   // one handshake reads the files at a time
	stamps  []fileStamp  // under mu
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// revocations are the serials revoked, by issuer (its raw subject).
type revocations struct {
	serials map[string]map[string]bool
}

func (rv *revocations) revoked(c *x509.Certificate) bool {
	return rv.serials[string(c.RawIssuer)][string(c.SerialNumber.Bytes())]
}

// load reads every file; on error nothing changes.
func (s *crlSet) load() error {
	rv := &revocations{serials: map[string]map[string]bool{}}
	stamps := make([]fileStamp, len(s.files))
	var errs []error
	for i, f := range s.files {
		if st, err := os.Stat(f); err == nil {
			stamps[i] = fileStamp{st.ModTime(), st.Size()}
		}
		crl, err := config.LoadCRLFile(f, s.cas)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m := rv.serials[string(crl.RawIssuer)]
		if m == nil {
			m = map[string]bool{}
			rv.serials[string(crl.RawIssuer)] = m
		}
		for _, e := range crl.RevokedCertificateEntries {
			m[string(e.SerialNumber.Bytes())] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.cur.Store(rv)
	s.stamps = stamps
	s.checked.Store(time.Now().UnixNano())
	return nil
}

// current returns the revocations in force, first reading the files
// again when crlCheckEvery has passed since the last look and one of them
// changed. A file that no longer loads leaves the last lists in force.
func (s *crlSet) current() *revocations {
	now := time.Now()
	last := s.checked.Load()
	if now.UnixNano()-last < int64(crlCheckEvery) || !s.checked.CompareAndSwap(last, now.UnixNano()) {
		return s.cur.Load()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for i, f := range s.files {
		st, err := os.Stat(f)
		if err != nil || st.ModTime() != s.stamps[i].mod || st.Size() != s.stamps[i].size {
			changed = true
		}
	}
	if changed {
		if err := s.load(); err != nil {
			// Not again until the file changes again.
			for i, f := range s.files {
				if st, err := os.Stat(f); err == nil {
					s.stamps[i] = fileStamp{st.ModTime(), st.Size()}
				}
			}
			s.log.Error("revocation list changed on disk and does not load; the last one stays in force", "err", err.Error())
		} else {
			s.log.Info("revocation list read again", "files", s.files)
		}
	}
	return s.cur.Load()
}
