package control

import (
	"errors"
	"fmt"
	"io"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// The serving side of the control: what a serving process does with the
// control's messages, applied to its own backends.

// Updates are what Follow does with messages other than health, breakers
// and operator state, which it applies to the backends itself.
type Updates struct {
	// Membership receives a new set of backends and returns the process's
	// backends after applying it; nil ignores membership messages.
	Membership func([]supervisor.Member) []*backend.Backend
	// Config receives a configuration generation after the first (a
	// reload); nil ignores them.
	Config func(supervisor.ConfigSource)
	// Stats reads the process's counters, for the supervisor's collects;
	// nil answers none.
	Stats func() *stats.Process
	// Reopen reopens the shared log file after a rotation; nil ignores it.
	Reopen func()
	// Tickets receives new TLS session-ticket keys, newest first; nil
	// ignores them.
	Tickets func([][]byte)
	// Ended is called once when the channel ends or breaks; the process
	// should then stop, so that the supervisor starts it afresh.
	Ended func(error)
}

// Follow reads what the control sends serving process p, the membership
// and the health snapshot, applies it to bs, and returns once it is
// applied; then it applies what the supervisor sends in the background:
// health transitions, breaker verdicts and operator state to the backends
// of the same name (names it does not know are ignored), membership and
// configuration through u, and answers collects with u.Stats.
func Follow(p *supervisor.Process, bs []*backend.Backend, u Updates) error {
	byName := index(bs)
	for {
		m, err := p.Recv()
		if err != nil {
			return fmt.Errorf("reading the health snapshot from the supervisor: %w", err)
		}
		if m.Kind == supervisor.KindMembership {
			if u.Membership != nil {
				byName = index(u.Membership(m.Membership))
			}
			continue
		}
		if m.Kind != supervisor.KindHealth || !m.Health.Snapshot {
			return fmt.Errorf("reading the health snapshot from the supervisor: expected the health snapshot, got a %q message", m.Kind)
		}
		applyHealth(byName, m.Health)
		break
	}
	generation := p.Config.Generation
	go func() {
		for {
			m, err := p.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("the supervisor closed it")
				}
				if u.Ended != nil {
					u.Ended(err)
				}
				return
			}
			switch m.Kind {
			case supervisor.KindHealth:
				applyHealth(byName, m.Health)
			case supervisor.KindOperator:
				if b := byName[m.Operator.Name]; b != nil {
					applyOperator(b, m.Operator)
				}
			case supervisor.KindBreaker:
				if b := byName[m.Breaker.Name]; b != nil {
					ApplyBreaker(b, m.Breaker)
				}
			case supervisor.KindMembership:
				if u.Membership != nil {
					byName = index(u.Membership(m.Membership))
				}
			case supervisor.KindReopen:
				if u.Reopen != nil {
					u.Reopen()
				}
			case supervisor.KindTickets:
				if u.Tickets != nil {
					u.Tickets(m.Tickets)
				}
			case supervisor.KindCollect:
				if u.Stats != nil {
					c := p.Counters(u.Stats)
					c.Collect = m.Collect
					p.Send(c)
				}
			case supervisor.KindConfig:
				if m.Config.Generation > generation && u.Config != nil {
					generation = m.Config.Generation
					u.Config(*m.Config)
				}
			}
		}
	}()
	return nil
}

func index(bs []*backend.Backend) map[string]*backend.Backend {
	byName := make(map[string]*backend.Backend, len(bs))
	for _, b := range bs {
		byName[b.Name] = b
	}
	return byName
}

func applyHealth(byName map[string]*backend.Backend, h *supervisor.HealthUpdate) {
	for _, s := range h.Backends {
		if b := byName[s.Name]; b != nil {
			b.SetHealthy(s.Up)
		}
	}
}

// ApplyBreaker makes b's breaker what another process reported: ejected
// until the time given, or closed.
func ApplyBreaker(b *backend.Backend, s *supervisor.BreakerState) {
	if s.Until == 0 {
		b.Close()
		return
	}
	b.SetTrips(s.Trips)
	b.Eject(time.Unix(0, s.Until))
}

// BreakerOf is b's breaker as a message carries it; a zero until means
// closed.
func BreakerOf(b *backend.Backend, until time.Time) *supervisor.BreakerState {
	s := &supervisor.BreakerState{Name: b.Name, Trips: b.Trips()}
	if !until.IsZero() {
		s.Until = until.UnixNano()
	}
	return s
}

// ReportBreaker tells the supervisor that b's breaker opened until until,
// or closed when until is zero, and why. The supervisor decides, logs the
// change and sends its verdict to every process, this one included
// (links.breakerChanged). It is the forwarding core's breaker hook
// (core.PoolConfig.OnBreaker).
func ReportBreaker(p *supervisor.Process, b *backend.Backend, until time.Time, reason string) {
	s := BreakerOf(b, until)
	s.Reason = reason
	p.Send(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: s})
}

func applyOperator(b *backend.Backend, o *supervisor.OperatorState) {
	b.SetDraining(o.Draining)
	b.SetDisabled(o.Disabled)
}

// operatorOf is b's operator state as a message carries it.
func operatorOf(b *backend.Backend) *supervisor.OperatorState {
	return &supervisor.OperatorState{Name: b.Name, Draining: b.Draining(), Disabled: b.Disabled()}
}
