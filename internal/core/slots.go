package core

import "sync/atomic"

// A feature keeps what it knows of one request in a slot of the
// exchange: a pointer to a state of the feature's own type, made at the
// first request that needs it and kept with the exchange, which a door
// reuses for a connection's (or a recycled stream's) next request. So a
// feature's state costs no allocation in the steady state, and Exchange
// has no field for any one feature.

// Slot is the place of one kind of feature's state in every exchange.
type Slot uint8

// maxSlots bounds the kinds of features that keep state per request.
const maxSlots = 8

var nextSlot atomic.Uint32

// NewSlot takes a slot for a kind of feature; it is called once per kind,
// at package start.
func NewSlot() Slot {
	n := nextSlot.Add(1) - 1
	if n >= maxSlots {
		panic("core: more kinds of feature state than maxSlots")
	}
	return Slot(n)
}

// SlotState returns x's state of type T in slot s, made on first use.
// The state is not cleared between requests: a feature resets what it
// uses when a request first reaches it.
func SlotState[T any](x *Exchange, s Slot) *T {
	if p, ok := x.slots[s].(*T); ok {
		return p
	}
	p := new(T)
	x.slots[s] = p
	return p
}
