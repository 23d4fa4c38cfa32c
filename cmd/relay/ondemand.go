package main

import (
	"context"
	"log/slog"

	"relay/internal/acme"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/supervisor"
)

// servingOnDemand is a serving process's side of certificates on demand
// (acme.on_demand): a handshake for a name it has no certificate for,
// which the allow rule admits, asks the control up sp's channel and
// waits for the answer, at most client_header_timeout (within which the
// handshake must end anyway) and acme.DemandWait. nil without
// acme.on_demand.
func servingOnDemand(cfg *config.Config, sp *supervisor.Process, certs *acme.Serving, log *slog.Logger) *acme.Demand {
	if cfg.ACME == nil || cfg.ACME.OnDemand == nil || certs == nil {
		return nil
	}
	return acme.NewDemand(certs, cfg.ACME.OnDemand.Allow, cfg.ClientHeaderTimeout, func(id uint64, host string) error {
		return sp.Send(supervisor.Message{Kind: supervisor.KindOnDemand, OnDemand: &supervisor.OnDemand{ID: id, Host: host}})
	}, log)
}

// onDemandUpdates hands the control's answers to on-demand asks to d.
func onDemandUpdates(u *control.Updates, d *acme.Demand) {
	if d == nil {
		return
	}
	u.OnDemand = func(o supervisor.OnDemand) { d.Answer(o.ID, o.Issued, o.Reason) }
}

// setOnDemand makes the TLS listener ask od for names it has no
// certificate for.
func (d *doors) setOnDemand(od *acme.Demand) {
	if d.certs != nil && od != nil {
		d.certs.SetOnDemand(od.Certificate)
	}
}

// OnDemand decides, in the control, whether a certificate is ordered for
// host (control.OnDemandACME).
func (a controlACME) OnDemand(ctx context.Context, host string) error { return a.m.OnDemand(ctx, host) }
