package core

import (
	"math/rand/v2"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
)

// Slow start: a backend that comes (back) into rotation (its checks pass
// again, its breaker closes, an operator enables it, it joins the pool)
// takes a share of its picks that grows from slowStartFloor to all of them
// over SlowStart, as HAProxy's slowstart and Envoy's slow start mode do, so
// a cold cache or a JIT still warming is not handed a full share at once.
//
// It works the same for every algorithm, after the pick: a backend still
// warming is passed by with the probability of the share it has not earned
// yet, and the request picks again among the others. With least-conn and
// p2c that matters most, since a returning backend with no requests in
// flight would otherwise win every pick. For ip-hash the draw is the
// client's hash rather than a random number: the same clients come back
// first and stay, so a client does not flip between backends during the
// ramp, and the backend's clients return in a steadily growing set. When
// every backend the request could go to is warming, it goes to one anyway.

// slowStartFloor is the share a backend gets as it returns (Envoy's default
// min_weight_percent is 10).
const slowStartFloor = 0.1

// cold reports whether b should be passed by for this request because it
// is warming up. key is the client's hash when the pool hashes clients.
func (p *Pool) cold(b *backend.Backend, key uint64) bool {
	at := b.ReturnedAt()
	if at == 0 {
		return false
	}
	age := time.Now().UnixNano() - at
	ramp := int64(p.cfg().SlowStart)
	if age >= ramp || age < 0 {
		b.EndReturn(at) // warm: no clock read on its later picks
		return false
	}
	share := slowStartFloor + (1-slowStartFloor)*float64(age)/float64(ramp)
	var draw float64
	if p.cfg().alg.HashesClient {
		draw = float64(balance.Mix(key)>>11) / (1 << 53)
	} else {
		draw = rand.Float64()
	}
	return draw >= share
}
