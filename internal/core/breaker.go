package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"relay/internal/backend"
)

// MaxBreakerOpenTime caps how long a breaker stays open: each reopening
// without a success between doubles the open time up to this, as Envoy's
// ejection time grows.
const MaxBreakerOpenTime = 5 * time.Minute

// Passive failure detection: each backend's circuit breaker (its state is
// the backend's, see backend/breaker.go; the policy is the pool's).
//
// After BreakerFailures failed requests in a row a backend is ejected for
// BreakerOpenTime: it leaves rotation at once, as after a failed health
// check. When that time has run out the breaker is half-open: the first
// request picked for the backend goes through as a probe and the others
// pass it by. A probe that succeeds closes the breaker; one that fails
// opens it again for twice as long, up to MaxBreakerOpenTime. A request
// fails when the backend cannot be reached, resets or closes the
// connection, sends no valid response in time, breaks off a response body,
// or answers with one of BreakerStatuses. What the client did (went away,
// sent a broken body) counts neither way.
//
// Breakers never hold out more than MaxEjectedPercent of a pool's members at
// once: failure detection must not empty a pool whose backends all answer
// errors because of something they share.

// outcome of an attempt as the breaker sees it.
type health uint8

const (
	unjudged health = iota // the client's doing, or nothing happened
	served                 // the backend answered
	faulted                // the backend failed
)

// statusSet is a set of HTTP statuses, one bit each.
type statusSet [10]uint64

func (s *statusSet) add(code int) {
	if code >= 0 && code < len(s)*64 {
		s[code/64] |= 1 << (code % 64)
	}
}

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < len(s)*64 && s[code/64]&(1<<(code%64)) != 0
}

// counts reports whether an answered attempt's status, or the grpc-status
// its response ended with, counts as a failure on the breaker.
func (s *settings) counts(a *attempt) bool {
	if s.breakerStatuses.has(a.status) {
		return true
	}
	if a.grpc == "" {
		return false
	}
	code, err := strconv.Atoi(a.grpc)
	return err == nil && s.breakerGRPC.has(code)
}

// judge records the attempt's outcome on b's breaker. probe says the attempt
// was b's half-open probe, whose place it gives back.
func (p *Pool) judge(b *backend.Backend, probe bool, a *attempt) {
	h, why := a.health, a.fault
	if h == served && p.cfg().counts(a) {
		h, why = faulted, fmt.Sprintf("answered %d", a.status)
		if a.grpc != "" && a.grpc != grpcCodes[grpcOK] {
			why = fmt.Sprintf("answered %d with grpc-status %s", a.status, a.grpc)
		}
	}
	switch h {
	case served:
		b.Succeed()
		if probe && b.Close() {
			const why = "probe request succeeded"
			p.core.cfg.Logger.Log(context.Background(), p.breakerLevel(slog.LevelInfo), "circuit breaker closed", "pool", p.cfg().Name, "backend", b.Name, "reason", why)
			p.announce(b, time.Time{}, why)
		}
	case faulted:
		n := b.Fail()
		if p.cfg().BreakerFailures > 0 && (probe || n >= p.cfg().BreakerFailures) {
			p.trip(b, probe, n, why)
		}
	}
	if probe {
		b.EndProbe()
	}
}

// judgeHead judges x's half-open probe, if it is one, by its response
// head: a response that streams for minutes, or a tunnel, must not keep
// the backend half-open that long. What becomes of the body is judged
// like any request's.
func (p *Pool) judgeHead(x *Exchange, status int) {
	if x.probe == nil {
		return
	}
	a := attempt{status: status, health: served}
	p.judge(x.probe, true, &a)
	x.probe = nil
}

// trip opens b's breaker after its probe or its n-th failure in a row.
func (p *Pool) trip(b *backend.Backend, probe bool, n int, why string) {
	p.breakerMu.Lock()
	defer p.breakerMu.Unlock()
	log := p.core.cfg.Logger
	if !probe {
		if b.Ejected() {
			return // open already, or half-open with its probe out
		}
		if backend.EjectionExceeds(p.state.Load().members, b, p.cfg().MaxEjectedPercent) {
			if n == p.cfg().BreakerFailures {
				log.Warn("circuit breaker not opened: too many backends ejected already",
					"pool", p.cfg().Name, "backend", b.Name, "failures", n, "last", why,
					"max_ejected_percent", p.cfg().MaxEjectedPercent)
			}
			return
		}
	}
	open := p.cfg().BreakerOpenTime << min(b.Trip()-1, 16)
	open = min(open, max(MaxBreakerOpenTime, p.cfg().BreakerOpenTime))
	until := time.Now().Add(open)
	b.Eject(until)
	msg := "circuit breaker opened"
	reason := fmt.Sprintf("%d failures in a row, the last: %s", n, why)
	if probe {
		msg, reason = "circuit breaker reopened", "probe request failed: "+why
	}
	log.Log(context.Background(), p.breakerLevel(slog.LevelWarn), msg, "pool", p.cfg().Name, "backend", b.Name,
		"reason", reason, "open_for", open.String())
	p.announce(b, until, reason)
}

// announce tells the pool's OnBreaker hook that b's breaker opened until
// until, or closed when until is zero, and why.
func (p *Pool) announce(b *backend.Backend, until time.Time, reason string) {
	if p.cfg().OnBreaker != nil {
		p.cfg().OnBreaker(b, until, reason)
	}
}

// breakerLevel is the level of a breaker's change in the log: level, or
// debug when an OnBreaker hook reports changes to a supervisor, which logs
// each change once for all processes.
func (p *Pool) breakerLevel(level slog.Level) slog.Level {
	if p.cfg().OnBreaker != nil {
		return slog.LevelDebug
	}
	return level
}
