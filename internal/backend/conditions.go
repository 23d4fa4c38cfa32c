package backend

import (
	"strings"
	"time"
)

// The conditions that keep a backend out of rotation, one bit each:
// ejected is its address's (Host.cond), the others its membership's
// (Backend.cond). A failing check is the membership's because pools may
// check one address differently (health_check.path); pools that check it
// alike share one check and its verdict.
const (
	failing  uint32 = 1 << iota // failing active health checks
	ejected                     // ejected until ejectedUntil
	draining                    // no new requests; in-flight ones finish
	disabled                    // taken out by an operator
)

// Available reports whether the backend may be picked now: no condition,
// of the membership or of its address, keeps it out. It runs on every
// pick: while no condition is set it is two atomic loads, and only an
// ejection reads the clock. An ejection whose time has passed no longer
// counts, without anyone having to clear it.
func (b *Backend) Available() bool {
	f := b.cond.Load() | b.Host.cond.Load()
	if f == 0 {
		return true
	}
	return f == ejected && time.Now().UnixNano() >= b.ejectedUntil.Load()
}

// TakesSticky reports whether the backend may take a client bound to it
// by a sticky session: it is available, or out only because it is
// draining. A drain keeps the clients a backend has (HAProxy's drain
// honours persistence) and lets them finish; a disable, a failing check
// or an open breaker moves them.
func (b *Backend) TakesSticky() bool {
	f := b.cond.Load()&^draining | b.Host.cond.Load()
	if f == 0 {
		return true
	}
	return f == ejected && time.Now().UnixNano() >= b.ejectedUntil.Load()
}

// Operable reports whether no operator took the backend out (drained or
// disabled): what a pool in panic still honours.
func (b *Backend) Operable() bool { return b.cond.Load()&(draining|disabled) == 0 }

// set raises or clears one of the membership's condition bits and reports
// whether that changed it.
func (b *Backend) set(bit uint32, on bool) (changed bool) {
	if on {
		return b.cond.Or(bit)&bit == 0
	}
	old := b.cond.And(^bit)
	if old&bit == 0 {
		return false
	}
	if old == bit {
		b.Returned(time.Now()) // nothing else keeps it out
	}
	return true
}

// Returned records that the backend came (back) into rotation at t: a
// condition that kept it out cleared, or it joined a pool at runtime. Slow
// start ramps its share up from then.
func (b *Backend) Returned(t time.Time) { b.returned.Store(t.UnixNano()) }

// EndReturn forgets the return recorded at at, once slow start is over;
// a later return is kept.
func (b *Backend) EndReturn(at int64) {
	b.returned.CompareAndSwap(at, 0)
	b.Host.returned.CompareAndSwap(at, 0)
}

// ReturnedAt is when the backend last came into rotation (Unix
// nanoseconds): the later of its membership's return and its address's
// conditions clearing; 0 if it has been in rotation since it was made.
func (b *Backend) ReturnedAt() int64 { return max(b.returned.Load(), b.Host.returned.Load()) }

// Healthy reports whether the backend passes its pool's active health
// checks. It says nothing of the other conditions: Available does.
func (b *Backend) Healthy() bool { return b.cond.Load()&failing == 0 }

// SetHealthy records the active checks' verdict and reports whether it
// changed, so callers log only transitions. It touches no other condition.
func (b *Backend) SetHealthy(ok bool) (changed bool) { return b.set(failing, !ok) }

// Draining reports whether the backend takes no new requests.
func (b *Backend) Draining() bool { return b.cond.Load()&draining != 0 }

// SetDraining starts or ends a drain: no new requests go to the backend,
// the ones in flight finish. It reports whether that changed.
func (b *Backend) SetDraining(on bool) (changed bool) { return b.set(draining, on) }

// Disabled reports whether an operator took the backend out.
func (b *Backend) Disabled() bool { return b.cond.Load()&disabled != 0 }

// SetDisabled takes the backend out of rotation, or puts it back, for an
// operator, and reports whether that changed.
func (b *Backend) SetDisabled(on bool) (changed bool) { return b.set(disabled, on) }

// EffectiveWeight is the weight algorithms that weigh load at pick time
// (least-conn, p2c) use: the configured Weight unless slow start or an
// operator set another.
func (b *Backend) EffectiveWeight() int { return int(b.weight.Load()) }

// SetEffectiveWeight sets the effective weight, at least 1: a backend that
// must take no new requests is drained, not weighted to zero.
func (b *Backend) SetEffectiveWeight(w int) { b.weight.Store(int64(max(w, 1))) }

// State is a copy of a backend's conditions at one moment, for logs, the
// admin API and the supervisor's channel.
type State struct {
	Healthy         bool
	EjectedUntil    time.Time // zero when not ejected
	Draining        bool
	Disabled        bool
	EffectiveWeight int
}

// State returns the backend's conditions now.
func (b *Backend) State() State {
	return State{
		Healthy:         b.Healthy(),
		EjectedUntil:    b.EjectedUntil(),
		Draining:        b.Draining(),
		Disabled:        b.Disabled(),
		EffectiveWeight: b.EffectiveWeight(),
	}
}

// Available reports whether the state lets the backend be picked.
func (s State) Available() bool {
	return s.Healthy && s.EjectedUntil.IsZero() && !s.Draining && !s.Disabled
}

// Reason says why a backend in this state may not be picked, or "" when it
// may: "failing health checks", "ejected until 15:04:05", "draining",
// "disabled", joined with "; " when several hold.
func (s State) Reason() string {
	var why []string
	if !s.Healthy {
		why = append(why, "failing health checks")
	}
	if !s.EjectedUntil.IsZero() {
		why = append(why, "ejected until "+s.EjectedUntil.Format(time.TimeOnly))
	}
	if s.Draining {
		why = append(why, "draining")
	}
	if s.Disabled {
		why = append(why, "disabled")
	}
	return strings.Join(why, "; ")
}
