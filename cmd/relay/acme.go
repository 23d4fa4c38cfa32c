package main

import (
	"context"
	"encoding/json"
	"log/slog"

	"relay/internal/acme"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/supervisor"
)

// startACME starts the instance's ACME manager (below) and makes
// stopping c stop it too.
func (c *controlled) startACME(cfg *config.Config, tlsListen string, log *slog.Logger) error {
	stop, err := startACME(cfg, c.ctl, c.reloader, tlsListen, log)
	if err != nil {
		return err
	}
	rest := c.stop
	c.stop = func() { stop(); rest() }
	return nil
}

// startACME starts the instance's ACME manager beside its control, once
// relay's listeners are bound (certmagic must find the TLS port in use,
// or it would bind it itself): the manager publishes each certificate it
// has through the control to every process, and the control answers the
// processes' asks for challenges from it; r, when not nil, gives it the
// acme.domains of each reload. It returns what stops it.
func startACME(cfg *config.Config, ctl *control.Control, r *reloader, tlsListen string, log *slog.Logger) (stop func(), err error) {
	if cfg.ACME == nil {
		return func() {}, nil
	}
	s, closeStorage, err := acme.SettingsOf(cfg, tlsListen)
	if err != nil {
		return nil, err
	}
	publish := func(is acme.Issued) {
		ctl.PublishCertificate(supervisor.Certificate{Names: is.Names, Chain: is.Chain, Key: is.Key}, is.NotAfter)
	}
	m, err := acme.New(s, publish, log)
	if err != nil {
		closeStorage()
		return nil, err
	}
	ctl.SetACME(controlACME{m})
	if err := m.Start(); err != nil {
		m.Stop()
		closeStorage()
		return nil, err
	}
	if r != nil {
		r.setACME(m)
	}
	return func() { m.Stop(); closeStorage() }, nil
}

// setACME makes m the manager a reload gives acme.domains to, and gives
// it those of the configuration applied since relay started, when a
// reload came first.
func (r *reloader) setACME(m *acme.Manager) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acme = m
	if cfg := r.applied.Load(); cfg != r.running {
		r.reloadACME(cfg)
	}
}

// reloadACME applies the acme.domains of a reload's cfg (the section's
// other keys wait for a restart, and RestartOnly names them): the names
// it adds are ordered (or loaded from storage), those it takes out, or
// that a tls_certificates entry now covers, are no longer ordered nor
// renewed, and the control forgets their certificates. The processes
// answer challenges and serve certificates for the new names as they
// apply the configuration (reconfigure). r.mu is held.
func (r *reloader) reloadACME(cfg *config.Config) {
	if r.acme == nil || cfg.ACME == nil {
		return
	}
	removed, err := r.acme.SetNames(acme.NamesOf(cfg))
	r.ctl.WithdrawCertificates(removed)
	if err != nil {
		r.log.Error("reload: ordering the names acme.domains adds", "err", err)
	}
}

// servingACME is a serving process's side of ACME: the certificates the
// control publishes, and asks for challenges sent up sp's channel; nil
// without an acme section.
func servingACME(cfg *config.Config, sp *supervisor.Process, log *slog.Logger) *acme.Serving {
	if cfg.ACME == nil {
		return nil
	}
	return acme.NewServing(cfg.ACME.Domains, func(id uint64, host string) error {
		return sp.Send(supervisor.Message{Kind: supervisor.KindChallenge, Challenge: &supervisor.Challenge{ID: id, Host: host}})
	})
}

// servingNames gives s the acme.domains of a configuration a serving
// process applies (reconfigure): the names whose challenges it answers
// and whose certificates it serves.
func servingNames(s *acme.Serving, cfg *config.Config) {
	if s != nil && cfg.ACME != nil {
		s.SetNames(cfg.ACME.Domains)
	}
}

// acmeUpdates are what a serving process does with the control's ACME
// messages.
func acmeUpdates(u *control.Updates, s *acme.Serving, log *slog.Logger) {
	if s == nil {
		return
	}
	u.Certificate = func(c supervisor.Certificate) {
		is, err := acme.Parse(c.Chain, c.Key)
		if err == nil {
			err = s.Put(is)
		}
		if err != nil {
			log.Error("certificate from the control refused; keeping the current one", "names", c.Names, "err", err)
		}
	}
	u.Challenge = func(c supervisor.Challenge) { s.Answer(c.ID, c.Found, c.Data) }
}

// controlACME is the manager as the control sees it (control.ACME).
type controlACME struct{ m *acme.Manager }

func (a controlACME) Challenge(ctx context.Context, host string) ([]byte, bool, error) {
	c, found, err := a.m.Challenge(ctx, host)
	if err != nil || !found {
		return nil, false, err
	}
	data, err := json.Marshal(c.Challenge)
	return data, err == nil, err
}

func (a controlACME) Counts() control.ACMECounts {
	c := a.m.Counts()
	return control.ACMECounts{Orders: c.Orders, Obtained: c.Obtained, Failures: c.Failures}
}
