package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"
	acmeapi "github.com/mholt/acmez/v3/acme"
	"go.uber.org/zap"
)

// Settings are what a Manager orders and how.
type Settings struct {
	// CA is the ACME directory URL.
	CA string
	// Roots are the roots trusted for the CA's own HTTPS; nil trusts
	// the system's.
	Roots *x509.CertPool
	// Email is the account's contact; "" registers without one.
	Email string
	// Names are the names to hold a certificate for, one each.
	Names []string
	// KeyType is the certificates' key: "ecdsa-p256" (the default),
	// "ecdsa-p384", "rsa2048", "rsa4096" or "ed25519".
	KeyType string
	// HTTP01 and TLSALPN01 say which challenges the CA may use.
	HTTP01, TLSALPN01 bool
	// ListenHost, HTTPPort and TLSPort are relay's own listeners, which
	// answer the challenges: certmagic is told them so that it never
	// binds a port of its own (it finds them in use and leaves them to
	// relay).
	ListenHost        string
	HTTPPort, TLSPort int
	// Storage holds certificates, keys, the account and the challenges
	// in flight; instances that share it share certificates.
	Storage certmagic.Storage
	// CheckInterval is how often the certificates in hand are looked at
	// for renewal; 0 is certmagic's 10 minutes.
	CheckInterval time.Duration
	// RenewalRatio is the part of a certificate's life left when it is
	// renewed; 0 is a third (renewal at two thirds of its life). The CA's
	// renewal information (ARI) comes first where it offers it.
	RenewalRatio float64
	// OnDemand, when not nil, orders certificates at the first
	// handshake for names of its rule (ondemand.go).
	OnDemand *OnDemand
}

// Issued is one certificate the manager has in hand, as PEM.
type Issued struct {
	Names    []string
	Chain    []byte // the certificate chain, leaf first
	Key      []byte // its private key
	NotAfter time.Time
}

// Counts are what a manager did since it started.
type Counts struct {
	Orders   uint64 // orders begun, renewals included
	Obtained uint64 // certificates obtained, renewals included
	Failures uint64 // orders that failed
}

// keyTypes maps Settings.KeyType to certmagic's names.
var keyTypes = map[string]certmagic.KeyType{
	"":           certmagic.P256,
	"ecdsa-p256": certmagic.P256,
	"ecdsa-p384": certmagic.P384,
	"rsa2048":    certmagic.RSA2048,
	"rsa4096":    certmagic.RSA4096,
	"ed25519":    certmagic.ED25519,
}

// KeyTypes are the values Settings.KeyType accepts, for error messages.
var KeyTypes = []string{"ecdsa-p256", "ecdsa-p384", "rsa2048", "rsa4096", "ed25519"}

// Manager orders, renews and holds the certificates of Settings.Names.
type Manager struct {
	s       Settings
	log     *slog.Logger
	publish func(Issued)
	cache   *certmagic.Cache
	cfg     *certmagic.Config
	// sync is cfg with quietIssuer, for the orders relay makes one
	// attempt at a time (firstorder.go, ondemand.go).
	sync   *certmagic.Config
	issuer *certmagic.ACMEIssuer
	// turns bounds the names brought in at once (firstorder.go).
	turns chan struct{}

	mu   sync.Mutex
	held map[string]Issued // by the first name of each certificate
	// managed are the names given to certmagic and not taken back,
	// those obtained on demand included; listed are those of the
	// settings' Names, as the last SetNames left them.
	managed map[string]bool
	// bringing are the names bringIn has not brought in yet: their
	// failed orders are logged there, with the next attempt's time.
	bringing map[string]bool
	listed   []string
	// stop ends the orders of a listed name, which SetNames calls when
	// it takes the name back.
	stop map[string]context.CancelFunc

	// od is the state of ordering on demand (ondemand.go).
	od demand

	orders, obtained, failures atomic.Uint64
	ctx                        context.Context
	cancel                     context.CancelFunc
}

// New returns a manager for s that hands every certificate it gets, at
// start from storage and later from the CA, to publish. It orders
// nothing until Start.
func New(s Settings, publish func(Issued), log *slog.Logger) (*Manager, error) {
	kt, ok := keyTypes[s.KeyType]
	if !ok {
		return nil, fmt.Errorf("key type %q is not one of %v", s.KeyType, KeyTypes)
	}
	if s.Storage == nil {
		return nil, errors.New("ACME needs a storage")
	}
	if !s.HTTP01 && !s.TLSALPN01 {
		return nil, errors.New("ACME needs at least one challenge: http-01 or tls-alpn-01")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{s: s, log: log, publish: publish, held: map[string]Issued{}, managed: map[string]bool{},
		bringing: map[string]bool{}, turns: make(chan struct{}, firstOrders), stop: map[string]context.CancelFunc{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return m.cfg, nil },
		RenewCheckInterval: s.CheckInterval,
		Logger:             zap.NewNop(),
	})
	cfg := certmagic.Config{
		RenewalWindowRatio: s.RenewalRatio,
		KeySource:          certmagic.StandardKeyGenerator{KeyType: kt},
		Storage:            s.Storage,
		OnEvent:            m.event,
		Logger:             zap.NewNop(),
	}
	m.cfg = certmagic.New(m.cache, cfg)
	m.sync = certmagic.New(m.cache, cfg)
	m.issuer = certmagic.NewACMEIssuer(m.cfg, certmagic.ACMEIssuer{
		CA:                      s.CA,
		TestCA:                  s.CA, // never a second CA to "test" against
		Email:                   s.Email,
		Agreed:                  true,
		TrustedRoots:            s.Roots,
		DisableHTTPChallenge:    !s.HTTP01,
		DisableTLSALPNChallenge: !s.TLSALPN01,
		ListenHost:              s.ListenHost,
		AltHTTPPort:             s.HTTPPort,
		AltTLSALPNPort:          s.TLSPort,
		Logger:                  zap.NewNop(),
	})
	m.cfg.Issuers = []certmagic.Issuer{m.issuer}
	m.sync.Issuers = []certmagic.Issuer{quietIssuer{m.issuer}}
	return m, nil
}

// Start manages every name of the settings: a certificate in storage is
// loaded and published, a missing one is ordered, in the background,
// with relay's backoff while the CA or the storage fails
// (firstorder.go).
func (m *Manager) Start() error {
	_, err := m.SetNames(m.s.Names)
	return err
}

// Manage adds names to what the manager holds (a reload that adds a
// name orders it). Names it holds already are left alone. Each name's
// orders run under a context of its own, which Unmanage ends.
func (m *Manager) Manage(names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		if !m.managed[n] {
			m.managed[n] = true
			m.bringing[n] = true
			var ctx context.Context
			ctx, m.stop[n] = context.WithCancel(m.ctx)
			go m.bringIn(ctx, n)
		}
	}
	return nil
}

// SetNames makes names the listed ones (the settings' Names, as a
// reload leaves them): the new ones are managed (Manage), and the ones
// no longer listed are taken back (Unmanage), which it returns.
func (m *Manager) SetNames(names []string) (removed []string, err error) {
	m.mu.Lock()
	for _, n := range m.listed {
		if !slices.Contains(names, n) {
			removed = append(removed, n)
		}
	}
	m.listed = slices.Clone(names)
	m.mu.Unlock()
	m.Unmanage(removed)
	return removed, m.Manage(names)
}

// Listed reports whether name is one of the listed names.
func (m *Manager) Listed(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.listed, name)
}

// Unmanage takes names back, as Caddy does with the names a new
// configuration no longer has: an order in flight for one is abandoned,
// its certificate leaves certmagic's cache (so it is never renewed) and
// what the manager holds, and is not published again. Storage keeps
// it: a name listed again is loaded from there, not ordered.
func (m *Manager) Unmanage(names []string) {
	if len(names) == 0 {
		return
	}
	subjects := make([]certmagic.SubjectIssuer, 0, len(names))
	m.mu.Lock()
	for _, n := range names {
		delete(m.managed, n)
		delete(m.bringing, n)
		if stop := m.stop[n]; stop != nil {
			stop()
			delete(m.stop, n)
		}
		delete(m.held, n)
		subjects = append(subjects, certmagic.SubjectIssuer{Subject: n})
	}
	m.mu.Unlock()
	m.cache.RemoveManaged(subjects)
	m.log.Info("ACME names no longer ordered nor renewed", "names", names)
}

// Stop ends renewals and orders in flight.
func (m *Manager) Stop() {
	m.cancel()
	m.cache.Stop()
}

// Counts says what the manager did so far.
func (m *Manager) Counts() Counts {
	return Counts{Orders: m.orders.Load(), Obtained: m.obtained.Load(), Failures: m.failures.Load()}
}

// Held returns the certificates in hand, sorted by first name.
func (m *Manager) Held() []Issued {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Issued, 0, len(m.held))
	for _, is := range m.held {
		out = append(out, is)
	}
	slices.SortFunc(out, func(a, b Issued) int { return strings.Compare(a.Names[0], b.Names[0]) })
	return out
}

// event takes certmagic's events: it counts orders and failures, logs
// one line for each order, renewal and failure, and publishes each
// certificate it learns of, from storage.
func (m *Manager) event(ctx context.Context, name string, data map[string]any) error {
	switch name {
	case "cert_obtaining":
		// A name Unmanage took back while certmagic was caching it (an
		// order that ended as the reload came) is neither renewed nor
		// ordered again: the order is refused, the name leaves the cache.
		if id, _ := data["identifier"].(string); !m.isManaged(id) {
			go m.cache.RemoveManaged([]certmagic.SubjectIssuer{{Subject: id}})
			return fmt.Errorf("%s is no longer in acme.domains", id)
		}
		m.orders.Add(1)
	case "cert_failed":
		name, _ := data["identifier"].(string)
		m.mu.Lock()
		managed, bringing := m.managed[name], m.bringing[name]
		m.mu.Unlock()
		if !managed {
			return nil // refused above
		}
		m.failures.Add(1)
		if !bringing { // bringIn logs its own, with its next attempt
			m.log.Error("ACME order failed", "name", name, "renewal", data["renewal"], "err", fmt.Sprint(data["error"]))
		}
	case "cert_obtained":
		m.obtained.Add(1)
		renewal, _ := data["renewal"].(bool)
		certPath, _ := data["certificate_path"].(string)
		keyPath, _ := data["private_key_path"].(string)
		is, err := m.load(ctx, certPath, keyPath)
		if err != nil {
			m.log.Error("ACME certificate obtained but not readable from storage", "name", data["identifier"], "err", err)
			return nil
		}
		if renewal {
			m.log.Info("ACME certificate renewed", "name", data["identifier"], "not_after", is.NotAfter)
		} else {
			m.log.Info("ACME certificate obtained", "name", data["identifier"], "not_after", is.NotAfter)
		}
		m.keep(is)
	case "cached_managed_cert":
		// Loaded from storage: at start, or after another instance
		// renewed it.
		sans, _ := data["sans"].([]string)
		if len(sans) == 0 {
			return nil
		}
		key := certmagic.StorageKeys.Safe(sans[0])
		is, err := m.load(ctx, certmagic.StorageKeys.SiteCert(m.issuer.IssuerKey(), key), certmagic.StorageKeys.SitePrivateKey(m.issuer.IssuerKey(), key))
		if err != nil {
			m.log.Error("ACME certificate in storage is not usable", "name", sans[0], "err", err)
			return nil
		}
		m.keep(is)
	}
	return nil
}

// isManaged reports whether name is managed: listed, or obtained on
// demand, and not taken back.
func (m *Manager) isManaged(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.managed[name]
}

// keep holds is and publishes it, unless the same certificate is held,
// or its name is no longer managed (an order that ended as Unmanage
// took the name back): that one leaves certmagic's cache again.
func (m *Manager) keep(is Issued) {
	m.mu.Lock()
	if !m.managed[is.Names[0]] {
		m.mu.Unlock()
		go m.cache.RemoveManaged([]certmagic.SubjectIssuer{{Subject: is.Names[0]}})
		return
	}
	old, had := m.held[is.Names[0]]
	same := had && string(old.Chain) == string(is.Chain)
	if !same {
		m.held[is.Names[0]] = is
	}
	m.mu.Unlock()
	if !same && m.publish != nil {
		m.publish(is)
	}
}

// load reads a certificate and its key from storage and checks that
// they make a pair; a value that is not a certificate is an error naming
// its key.
func (m *Manager) load(ctx context.Context, certKey, keyKey string) (Issued, error) {
	chain, err := m.s.Storage.Load(ctx, certKey)
	if err != nil {
		return Issued{}, fmt.Errorf("loading %s: %w", certKey, err)
	}
	key, err := m.s.Storage.Load(ctx, keyKey)
	if err != nil {
		return Issued{}, fmt.Errorf("loading %s: %w", keyKey, err)
	}
	return Parse(chain, key)
}

// Parse checks a PEM chain and key and returns them as an Issued; an
// error says what is wrong with them.
func Parse(chain, key []byte) (Issued, error) {
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return Issued{}, fmt.Errorf("not a certificate and its key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return Issued{}, fmt.Errorf("the certificate does not parse: %w", err)
	}
	names := append([]string{}, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return Issued{}, errors.New("the certificate names no host")
	}
	return Issued{Names: names, Chain: chain, Key: key, NotAfter: leaf.NotAfter}, nil
}

// Pair is is as a tls.Certificate with its leaf parsed.
func (is Issued) Pair() (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(is.Chain, is.Key)
	if err != nil {
		return nil, err
	}
	return &pair, nil
}

// Challenge is what answering one ACME challenge needs.
type Challenge struct {
	acmeapi.Challenge
}

// HTTP01Answer is the body of the answer to an HTTP-01 request for
// token, and whether c answers it.
func (c Challenge) HTTP01Answer(token string) (string, bool) {
	if c.Type != acmeapi.ChallengeTypeHTTP01 || c.Token != token || token == "" {
		return "", false
	}
	return c.KeyAuthorization, true
}

// TLSALPN01Certificate is the certificate that answers a TLS-ALPN-01
// handshake for c.
func (c Challenge) TLSALPN01Certificate() (*tls.Certificate, error) {
	if c.Type != acmeapi.ChallengeTypeTLSALPN01 {
		return nil, fmt.Errorf("the challenge in flight for %s is %s, not tls-alpn-01", c.Identifier.Value, c.Type)
	}
	return acmez.TLSALPN01ChallengeCert(c.Challenge)
}

// Challenge returns the challenge in flight for host: one this instance
// started (in memory), else one another instance sharing the storage
// started.
func (m *Manager) Challenge(ctx context.Context, host string) (Challenge, bool, error) {
	if c, ok := certmagic.GetACMEChallenge(host); ok {
		return Challenge{c.Challenge}, true, nil
	}
	return m.stored(ctx, host)
}

// stored returns the challenge for host that storage holds: every
// instance writes its challenges there before the CA is told to look.
func (m *Manager) stored(ctx context.Context, host string) (Challenge, bool, error) {
	key := path.Join("acme", certmagic.StorageKeys.Safe(m.issuer.IssuerKey()), "challenge_tokens", certmagic.StorageKeys.Safe(host)+".json")
	b, err := m.s.Storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return Challenge{}, false, nil
	}
	if err != nil {
		return Challenge{}, false, fmt.Errorf("loading %s: %w", key, err)
	}
	var c acmeapi.Challenge
	if err := json.Unmarshal(b, &c); err != nil {
		return Challenge{}, false, fmt.Errorf("%s is not a challenge: %w", key, err)
	}
	return Challenge{c}, true, nil
}
