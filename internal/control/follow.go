package control

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// The serving side of the control: what a serving process does with the
// control's messages, applied to its own backends.

// Plane is what a serving process's membership lands in: its data plane
// (*dataplane.Plane, which the control does not import).
type Plane interface {
	// SetMembers makes ms the members of every pool and returns the
	// process's backend of each member, in the same order (member i's at
	// i, nil for one it left out). When it refuses ms, nothing changes,
	// the error says why, and the backends are the current ones.
	SetMembers(ms []supervisor.Member) ([]*backend.Backend, error)
}

// Updates are what Follow does with messages other than membership,
// health, breakers and operator state, which it applies to the data plane
// and its backends itself.
type Updates struct {
	// Config receives a configuration generation after the first (a
	// reload); nil ignores them.
	Config func(supervisor.ConfigSource)
	// Stats reads the process's counters, for the control's collects;
	// nil answers none.
	Stats func() *stats.Process
	// Reopen reopens the shared log file after a rotation; nil ignores it.
	Reopen func()
	// Tickets receives new TLS session-ticket keys, newest first; nil
	// ignores them.
	Tickets func([][]byte)
	// Certificate receives each ACME certificate the control publishes;
	// Challenge each answer to an ask for a challenge. nil ignores them.
	Certificate func(supervisor.Certificate)
	Challenge   func(supervisor.Challenge)
	// OnDemand receives each answer to an ask for a certificate on
	// demand; nil ignores them.
	OnDemand func(supervisor.OnDemand)
	// Ended is called once when the channel ends or breaks; the process
	// should then stop, so that the supervisor starts it afresh.
	Ended func(error)
	// Log receives a membership the data plane refused; nil discards it.
	Log *slog.Logger
}

// Follow reads what the control sends serving process p first, the
// membership, the ACME certificates and the health snapshot, applies it, and returns once it is
// applied; then it applies what the control sends in the background:
// membership to plane, health transitions and operator state to the
// member of the pool and name given, breaker verdicts to the address
// named (every pool's membership of it), configuration through u, and
// answers collects with u.Stats. Names it does not know are ignored. A
// nil plane ignores membership, and then health, breakers and operator
// state find no backend.
func Follow(p *supervisor.Process, plane Plane, u Updates) error {
	if u.Log == nil {
		u.Log = slog.New(slog.DiscardHandler)
	}
	var held members
	apply := func(ms []supervisor.Member) {
		if plane != nil {
			held = applyMembership(plane, ms, u.Log)
		}
	}
	for {
		m, err := p.Recv()
		if err != nil {
			return fmt.Errorf("reading the health snapshot from the control: %w", err)
		}
		if m.Kind == supervisor.KindMembership {
			apply(m.Membership)
			continue
		}
		if m.Kind == supervisor.KindCertificate {
			if u.Certificate != nil {
				u.Certificate(*m.Certificate)
			}
			continue
		}
		if m.Kind != supervisor.KindHealth || !m.Health.Snapshot {
			return fmt.Errorf("reading the health snapshot from the control: expected the health snapshot, got a %q message", m.Kind)
		}
		held.health(m.Health)
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
				held.health(m.Health)
			case supervisor.KindOperator:
				if b := held.byMember[memberKey{m.Operator.Pool, m.Operator.Name}]; b != nil {
					applyOperator(b, m.Operator)
				}
			case supervisor.KindBreaker:
				if h := held.hosts[m.Breaker.Name]; h != nil {
					ApplyBreaker(h, m.Breaker)
				}
			case supervisor.KindMembership:
				apply(m.Membership)
			case supervisor.KindReopen:
				if u.Reopen != nil {
					u.Reopen()
				}
			case supervisor.KindTickets:
				if u.Tickets != nil {
					u.Tickets(m.Tickets)
				}
			case supervisor.KindCertificate:
				if u.Certificate != nil {
					u.Certificate(*m.Certificate)
				}
			case supervisor.KindChallenge:
				if u.Challenge != nil {
					u.Challenge(*m.Challenge)
				}
			case supervisor.KindOnDemand:
				if u.OnDemand != nil {
					u.OnDemand(*m.OnDemand)
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

// memberKey names a member: its pool and URL.
type memberKey struct{ pool, url string }

// members are a process's backends by member and their addresses by name.
type members struct {
	byMember map[memberKey]*backend.Backend
	hosts    map[string]*backend.Host
}

// applyMembership makes ms the members of plane's pools and returns
// the backends it holds then by member and address; a membership the
// plane refuses is logged, and the current members stay.
func applyMembership(plane Plane, ms []supervisor.Member, log *slog.Logger) members {
	bs, err := plane.SetMembers(ms)
	if err != nil {
		log.Error("membership from the supervisor refused; keeping the current backends", "err", err)
	} else {
		log.Debug("backends changed", "backends", len(bs))
	}
	return indexOf(ms, bs)
}

// indexOf pairs the members ms with bs, their backends in the same order.
func indexOf(ms []supervisor.Member, bs []*backend.Backend) members {
	held := members{byMember: make(map[memberKey]*backend.Backend, len(bs)), hosts: make(map[string]*backend.Host, len(bs))}
	for i, b := range bs {
		if i < len(ms) && b != nil {
			held.byMember[memberKey{ms[i].Pool, ms[i].URL}] = b
			held.hosts[b.Name] = b.Host
		}
	}
	return held
}

func (held members) health(h *supervisor.HealthUpdate) {
	for _, s := range h.Backends {
		if b := held.byMember[memberKey{s.Pool, s.Name}]; b != nil {
			b.SetHealthy(s.Up)
		}
	}
}

// ApplyBreaker makes h's breaker what the control decided: ejected until
// the time given, or closed. The breaker is the address's, so every pool
// holding h follows.
func ApplyBreaker(h *backend.Host, s *supervisor.BreakerState) {
	if s.Until == 0 {
		h.Close()
		return
	}
	h.SetTrips(s.Trips)
	h.Eject(time.Unix(0, s.Until))
}

// BreakerOf is h's breaker as a message carries it; a zero until means
// closed.
func BreakerOf(h *backend.Host, until time.Time) *supervisor.BreakerState {
	s := &supervisor.BreakerState{Name: h.Name, Trips: h.Trips()}
	if !until.IsZero() {
		s.Until = until.UnixNano()
	}
	return s
}

// ReportBreaker returns pool's breaker hook in serving process p (the
// forwarding core's core.PoolConfig.OnBreaker): it tells the control
// that a member's breaker opened until until, or closed when until is
// zero, and why. The control decides, logs the change and sends its
// verdict to every process, this one included (Control.breakerChanged).
func ReportBreaker(p *supervisor.Process, pool string) func(b *backend.Backend, until time.Time, reason string) {
	return func(b *backend.Backend, until time.Time, reason string) {
		s := BreakerOf(b.Host, until)
		s.Pool, s.Reason = pool, reason
		p.Send(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: s})
	}
}

func applyOperator(b *backend.Backend, o *supervisor.OperatorState) {
	b.SetDraining(o.Draining)
	b.SetDisabled(o.Disabled)
}

// operatorOf is the operator state of b, a member of pool, as a message
// carries it.
func operatorOf(pool string, b *backend.Backend) *supervisor.OperatorState {
	return &supervisor.OperatorState{Pool: pool, Name: b.Name, Draining: b.Draining(), Disabled: b.Disabled()}
}
