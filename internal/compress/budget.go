package compress

import (
	"math"
	"runtime/debug"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// The encoders in use hold memory for as long as their responses last,
// and a response lasts as long as its client takes to read it: a client
// that opens its hundred HTTP/2 streams, on each of many connections,
// each with a compressed response it never reads, would make relay hold
// a hundred times 3 MiB per connection of brotli state. So the encoders
// in use in a process share one budget of memory, counted by what each
// coding and level holds at its worst (encoderCost); a response that
// would take an encoder past it goes uncompressed, as it would to a
// client that accepts no coding. The budget is the process's, whatever
// the Policy: every route and pool draws on it.

// DefaultEncoderMemory is the memory the encoders in use of one serving
// process may hold when GOMEMLIMIT is not set: about 80 brotli streams
// at quality 4, 240 gzip ones at level 5 or 270 zstd ones at fastest,
// far more than a process compresses at once for clients that read what
// they are sent. With GOMEMLIMIT the default is a quarter of it.
const DefaultEncoderMemory = 256 << 20

// budget is the memory the encoders in use hold, against its limit.
type budget struct {
	limit   atomic.Int64 // bytes
	used    atomic.Int64 // bytes, the costs of the encoders in use
	inUse   atomic.Int64 // encoders taken and not released
	refused atomic.Uint64
}

// encoders is the process's budget.
var encoders = func() *budget {
	b := &budget{}
	b.limit.Store(defaultEncoderMemory())
	return b
}()

// defaultEncoderMemory is DefaultEncoderMemory, or a quarter of the
// runtime's memory limit when one is set.
func defaultEncoderMemory() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l / 4
	}
	return DefaultEncoderMemory
}

// take reserves cost bytes for one encoder, and reports whether it may be
// used. One encoder is always allowed, however large its cost: a budget
// smaller than one encoder of a configured level would otherwise turn
// that level off without a word.
func (b *budget) take(cost int64) bool {
	if n := b.used.Add(cost); n > b.limit.Load() && n != cost {
		b.used.Add(-cost)
		b.refused.Add(1)
		return false
	}
	b.inUse.Add(1)
	return true
}

// give returns what take reserved.
func (b *budget) give(cost int64) {
	b.inUse.Add(-1)
	b.used.Add(-cost)
}

// SetEncoderMemory sets the memory the encoders in use of this process
// may hold, in bytes; 0 or less restores the default. It returns the
// limit it replaces. A smaller limit takes effect as encoders are
// released: none in use is taken back.
func SetEncoderMemory(n int64) int64 {
	if n <= 0 {
		n = defaultEncoderMemory()
	}
	return encoders.limit.Swap(n)
}

// EncoderMemory is the process's limit on the memory of the encoders in
// use (SetEncoderMemory).
func EncoderMemory() int64 { return encoders.limit.Load() }

// Usage is what the process's encoders are doing, as of one moment.
type Usage struct {
	// InUse is the encoders taken (Policy.Encoder) and not released, and
	// Bytes what they are counted for against the limit.
	InUse int64
	Bytes int64
	// OverBudget counts the responses sent uncompressed, since the
	// process started, because an encoder would have taken the encoders
	// in use past the limit.
	OverBudget uint64
}

// Encoders returns the process's Usage.
func Encoders() Usage {
	return Usage{InUse: encoders.inUse.Load(), Bytes: encoders.used.Load(), OverBudget: encoders.refused.Load()}
}

// encoderCost is what one encoder of key holds at its worst, in bytes:
// measured as a body of 1 MiB written 16 KiB at a time without a flush
// (a backend that sends faster than relay reads), with its output
// drained after each write (TestEncoderCost), and rounded up. A body
// that pauses, and so flushes, makes brotli hold less: 2 MiB at quality
// 4 in place of 3.3.
func encoderCost(key poolKey) int64 {
	const kib = 1 << 10
	switch key.coding {
	case Gzip:
		// Levels 1 to 9.
		costs := [...]int64{832, 1216, 1216, 960, 1088, 1088, 1088, 1088, 1472}
		if key.level >= 1 && key.level <= len(costs) {
			return costs[key.level-1] * kib
		}
		return 1472 * kib
	case Brotli:
		// Qualities 1 to 11.
		costs := [...]int64{320, 1472, 1408, 3328, 3840, 4928, 11072, 19264, 37824, 7552, 7552}
		if key.level >= 1 && key.level <= len(costs) {
			return costs[key.level-1] * kib
		}
		return 37824 * kib
	case Zstd:
		switch zstd.EncoderLevel(key.level) {
		case zstd.SpeedFastest:
			return 960 * kib
		case zstd.SpeedDefault:
			return 2176 * kib
		case zstd.SpeedBetterCompression:
			return 5056 * kib
		}
		return 35648 * kib
	}
	return 0
}
