package acme

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mholt/acmez/v3"
	acmeapi "github.com/mholt/acmez/v3/acme"
)

// ALPN is the protocol a CA's TLS-ALPN-01 validation asks for (RFC 8737).
const ALPN = acmez.ACMETLS1Protocol

// Serving is what a serving process does with ACME: it serves the
// certificates the control publishes (Served) and answers the CA's
// TLS-ALPN-01 handshakes and HTTP-01 requests for the names relay
// orders, asking the control for the challenge in flight.
type Serving struct {
	Served
	// names are the names of acme.domains, swapped whole by SetNames;
	// handshakes read them without a lock.
	names atomic.Pointer[[]string]
	ask   func(id uint64, host string) error
	// also admits names beyond names: those relay may order on demand
	// (ondemandserving.go); set before the listener serves.
	also func(name string) bool

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan found
}

type found struct {
	ok   bool
	data []byte
}

// maxWaiting bounds the asks one process has in flight; a handshake
// beyond it fails at once. Only names relay orders are asked for.
const maxWaiting = 32

// askWait bounds how long a handshake or an HTTP-01 request waits for
// the control's answer.
const askWait = 5 * time.Second

// NewServing returns the serving side for names, asking the control
// through ask, whose answers come back through Answer.
func NewServing(names []string, ask func(id uint64, host string) error) *Serving {
	s := &Serving{ask: ask, waiting: map[uint64]chan found{}}
	s.names.Store(&names)
	return s
}

// Manages reports whether relay orders a certificate for name.
func (s *Serving) Manages(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	return slices.Contains(*s.names.Load(), name) || s.also != nil && s.also(name)
}

// SetNames makes names those relay orders, as a reload leaves
// acme.domains: the challenges of a name no longer among them (nor
// admitted on demand) go unanswered from now on, and the certificate of
// a name it takes out is no longer served (a name on_demand admits is
// then asked for again at its next handshake, as a new one would be).
// One SetNames runs at a time (the process applies one configuration at
// a time).
func (s *Serving) SetNames(names []string) {
	names = slices.Clone(names)
	old := s.names.Swap(&names)
	s.Served.keep(func(n string) bool { return slices.Contains(names, n) || !slices.Contains(*old, n) })
}

// Put serves is, unless relay orders none of its names (a certificate
// that crossed a reload taking its name back), which it leaves out.
func (s *Serving) Put(is Issued) error {
	if !slices.ContainsFunc(is.Names, s.Manages) {
		return nil
	}
	return s.Served.Put(is)
}

// Answer takes the control's answer to ask id.
func (s *Serving) Answer(id uint64, ok bool, data []byte) {
	s.mu.Lock()
	ch := s.waiting[id]
	delete(s.waiting, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- found{ok, data}
	}
}

// Challenge asks the control for the challenge in flight for host.
func (s *Serving) Challenge(ctx context.Context, host string) (Challenge, error) {
	if !s.Manages(host) {
		return Challenge{}, fmt.Errorf("relay orders no certificate for %q", host)
	}
	ch := make(chan found, 1)
	s.mu.Lock()
	if len(s.waiting) >= maxWaiting {
		s.mu.Unlock()
		return Challenge{}, errors.New("too many ACME challenge lookups in flight")
	}
	s.next++
	id := s.next
	s.waiting[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}
	if err := s.ask(id, strings.ToLower(host)); err != nil {
		forget()
		return Challenge{}, err
	}
	t := time.NewTimer(askWait)
	defer t.Stop()
	select {
	case f := <-ch:
		if !f.ok {
			return Challenge{}, fmt.Errorf("%w for %q", errNoChallenge, host)
		}
		var c acmeapi.Challenge
		if err := json.Unmarshal(f.data, &c); err != nil {
			return Challenge{}, fmt.Errorf("the challenge for %q does not decode: %w", host, err)
		}
		return Challenge{c}, nil
	case <-t.C:
		forget()
		return Challenge{}, fmt.Errorf("no answer about the ACME challenge for %q within %v", host, askWait)
	case <-ctx.Done():
		forget()
		return Challenge{}, ctx.Err()
	}
}

// Default is the certificate for a handshake without a name relay has a
// certificate for, when no file gives one: the first name of the list
// that has its certificate in hand, as the first file's is with files.
func (s *Serving) Default() *tls.Certificate {
	for _, n := range *s.names.Load() {
		if c := s.Certificate(n); c != nil {
			return c
		}
	}
	return nil
}

// errNoChallenge says the control has no challenge in flight for a name.
var errNoChallenge = errors.New("no ACME challenge in flight")

// HTTP01 returns the key authorization answering an HTTP-01 request for
// token under host (core.HTTP01Answers): found is false when relay
// orders no certificate for host, or the challenge in flight for it is
// not an HTTP-01 one with exactly that token. err is a lookup that
// failed: too many in flight in this process, or no answer within
// askWait.
func (s *Serving) HTTP01(host, token string) (answer string, found bool, err error) {
	if !s.Manages(host) {
		return "", false, nil
	}
	c, err := s.Challenge(context.Background(), host)
	if errors.Is(err, errNoChallenge) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	answer, found = c.HTTP01Answer(token)
	return answer, found, nil
}

// ChallengeCertificate answers a TLS-ALPN-01 handshake.
func (s *Serving) ChallengeCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := s.Challenge(hello.Context(), hello.ServerName)
	if err != nil {
		return nil, err
	}
	return c.TLSALPN01Certificate()
}
