package acme

import (
	"crypto/tls"
	"strings"
	"sync"
	"sync/atomic"
)

// Served is a serving process's side of the manager: the certificates
// it has been handed, by name, for its TLS listener to pick from by the
// name a client asks for. Handshakes read it without a lock; Put swaps a
// new map in.
type Served struct {
	mu     sync.Mutex // serialises Put
	byName atomic.Pointer[map[string]*tls.Certificate]
}

// Put makes is the certificate of each of its names, in place of any
// certificate they had. A pair that does not load changes nothing.
func (s *Served) Put(is Issued) error {
	pair, err := is.Pair()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]*tls.Certificate{}
	if cur := s.byName.Load(); cur != nil {
		for n, c := range *cur {
			next[n] = c
		}
	}
	for _, n := range is.Names {
		next[strings.ToLower(n)] = pair
	}
	s.byName.Store(&next)
	return nil
}

// keep drops the certificates of the names still does not keep.
func (s *Served) keep(still func(name string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.byName.Load()
	if cur == nil {
		return
	}
	next := make(map[string]*tls.Certificate, len(*cur))
	for n, c := range *cur {
		if still(n) {
			next[n] = c
		}
	}
	s.byName.Store(&next)
}

// Certificate is the certificate for name: the one for the name itself,
// else one for the wildcard of its parent (*.example.com for
// a.example.com), else nil.
func (s *Served) Certificate(name string) *tls.Certificate {
	cur := s.byName.Load()
	if cur == nil || name == "" {
		return nil
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if c := (*cur)[name]; c != nil {
		return c
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		return (*cur)["*"+name[i:]]
	}
	return nil
}

// Len is how many names have a certificate.
func (s *Served) Len() int {
	if cur := s.byName.Load(); cur != nil {
		return len(*cur)
	}
	return 0
}
