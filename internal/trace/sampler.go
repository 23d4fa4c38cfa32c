package trace

import (
	"encoding/binary"
	"math"
)

// Sampler decides whether relay records a request's span and sends it.
// Ratio, from 0 to 1, is the share of traces relay starts or continues on
// its own account that are sampled. With HonourParent, a request whose
// traceparent is valid follows the caller's sampled flag instead, so that a
// trace is either whole or absent (OpenTelemetry's ParentBased sampler,
// and Envoy's default). The zero Sampler samples nothing.
type Sampler struct {
	Ratio        float64
	HonourParent bool
}

// Sample reports whether the request with parent p, in trace t, is
// sampled. The ratio is judged on the trace id alone, as OpenTelemetry's
// TraceIDRatioBased judges it: the id's last 8 bytes as a big-endian
// number, shifted right by one, below Ratio·2^63. Every relay process and
// instance, and every OpenTelemetry SDK with the same ratio, so decides the
// same for the same trace, and a ratio of 0.01 samples 1% of random ids.
// It allocates nothing and takes no lock.
func (s Sampler) Sample(p Parent, t TraceID) bool {
	if p.Valid && s.HonourParent {
		return p.Sampled()
	}
	return s.byRatio(t)
}

func (s Sampler) byRatio(t TraceID) bool {
	switch {
	case s.Ratio >= 1:
		return true
	case !(s.Ratio > 0): // also NaN
		return false
	}
	bound := uint64(s.Ratio * (1 << 63))
	return binary.BigEndian.Uint64(t[8:])>>1 < bound
}

// validRatio reports whether r may be a Sampler's Ratio.
func validRatio(r float64) bool { return r >= 0 && r <= 1 && !math.IsNaN(r) }
