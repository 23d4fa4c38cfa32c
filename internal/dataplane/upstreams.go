package dataplane

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/tlsconf"
)

// Upstreams gives https backends their TLS settings under the running
// configuration: a backend listed in the file gets those of its entry, one
// the admin API added gets the backend_tls_ defaults. The control and
// every serving process's data plane hold one, so health checks and
// requests speak to a backend alike. A reload reads the files again.
type Upstreams struct {
	log   *slog.Logger
	mu    sync.Mutex
	cfg   *config.Config
	built map[string]built // by backend name
}

type built struct {
	settings config.UpstreamTLS
	tc       *tls.Config
}

// NewUpstreams returns the TLS settings of backends under cfg.
func NewUpstreams(cfg *config.Config, log *slog.Logger) *Upstreams {
	u := &Upstreams{log: log}
	u.Reload(cfg)
	return u
}

// Reload takes a new configuration; the next Prepare of each backend
// builds its settings afresh, reading certificate files again.
func (u *Upstreams) Reload(cfg *config.Config) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cfg, u.built = cfg, make(map[string]built)
}

// settingsIn returns the TLS settings cfg gives the backend b: an address
// is one connection target whichever pools hold it, so the first pool
// that lists it (the top level first) decides; one the file lists nowhere
// (from etcd or the admin API) gets the backend_tls_ settings of its own
// pool.
func settingsIn(cfg *config.Config, b *backend.Backend) config.UpstreamTLS {
	for _, np := range cfg.AllPools() {
		for _, cb := range np.Backends {
			if cb.URL.String() == b.Name {
				return cb.TLS
			}
		}
	}
	if p := cfg.LookupPool(b.Pool); p != nil {
		return p.BackendTLS
	}
	return cfg.BackendTLS
}

// Prepare gives b the TLS settings it should have now; an http backend
// gets none.
func (u *Upstreams) Prepare(b *backend.Backend) error {
	apply, err := u.Plan(b)
	if err == nil {
		apply()
	}
	return err
}

// Plan reads what b's TLS settings need under the running configuration
// (certificate files, unless built for it already) and returns the step
// that gives them to b, which cannot fail: a change can check every
// backend before it changes any.
func (u *Upstreams) Plan(b *backend.Backend) (apply func(), err error) {
	if b.URL.Scheme != "https" {
		return func() {}, nil
	}
	u.mu.Lock()
	s := settingsIn(u.cfg, b)
	cur, ok := u.built[b.Name]
	u.mu.Unlock()
	if ok && cur.settings == s {
		return func() { b.SetTLS(cur.tc) }, nil
	}
	return u.build(b, s)
}

// PlanUnder is Plan for a configuration being reloaded, before relay
// takes it (adopt): it reads every file afresh and changes nothing until
// its steps run, after adopt.
func (u *Upstreams) PlanUnder(cfg *config.Config) func(*backend.Backend) (func(), error) {
	return func(b *backend.Backend) (func(), error) {
		if b.URL.Scheme != "https" {
			return func() {}, nil
		}
		return u.build(b, settingsIn(cfg, b))
	}
}

// build reads the files of settings s for b and returns the step that
// records them and gives them to b.
func (u *Upstreams) build(b *backend.Backend, s config.UpstreamTLS) (func(), error) {
	tc, err := tlsconf.Client(b.URL, s)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", b.Name, err)
	}
	return func() {
		if s.InsecureSkipVerify {
			u.log.Warn("TLS certificate verification is off for this backend (tls_insecure_skip_verify): anyone on the path can impersonate it", "backend", b.Name)
		}
		u.mu.Lock()
		u.built[b.Name] = built{settings: s, tc: tc}
		u.mu.Unlock()
		b.SetTLS(tc)
	}, nil
}
