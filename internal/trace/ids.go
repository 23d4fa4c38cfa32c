package trace

import (
	"encoding/binary"
	"math/rand/v2"
)

// NewTraceID returns a random trace id, never all zero. It draws from
// math/rand/v2's global source, which is the runtime's per-thread ChaCha8:
// no lock, no allocation, a few nanoseconds, and unpredictable enough that
// ids from many relay instances do not collide. A request path cannot hold
// a generator of its own per goroutine, and a shared one would need a lock.
func NewTraceID() TraceID {
	var t TraceID
	for t.IsZero() {
		binary.LittleEndian.PutUint64(t[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

// NewSpanID returns a random span id, never all zero, from the same source
// as NewTraceID.
func NewSpanID() SpanID {
	var s SpanID
	for s.IsZero() {
		binary.LittleEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
