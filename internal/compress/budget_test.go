package compress

import (
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// withBudget gives p a budget of its own of limit bytes, so that the
// test neither sees nor disturbs the process's.
func withBudget(p *Policy, limit int64) *budget {
	b := &budget{}
	b.limit.Store(limit)
	p.budget = b
	return b
}

// The encoders in use hold at most their budget: past it Encoder gives
// nil, which the core takes for "send it as it is", and every Release
// gives its encoder's cost back, once.
func TestEncoderBudget(t *testing.T) {
	p := mustNew(t, Config{})
	cost := p.costs[Brotli]
	b := withBudget(p, 2*cost+cost/2)
	first, second := p.Encoder(Brotli), p.Encoder(Brotli)
	if first == nil || second == nil {
		t.Fatalf("two encoders within the budget: %v, %v", first, second)
	}
	if enc := p.Encoder(Brotli); enc != nil {
		t.Fatalf("a third brotli encoder (%d bytes each, %d in all) was given past the budget of %d", cost, 3*cost, b.limit.Load())
	}
	// A cheaper coding still fits in what is left.
	gz := p.Encoder(Gzip)
	if p.costs[Gzip] <= cost/2 && gz == nil {
		t.Errorf("gzip (%d bytes) refused with %d left", p.costs[Gzip], cost/2)
	}
	gz.Release()
	if got := b.refused.Load(); got != 1 {
		t.Errorf("refused %d times, want 1", got)
	}
	if n, used := b.inUse.Load(), b.used.Load(); n != 2 || used != 2*cost {
		t.Errorf("in use: %d encoders, %d bytes; want 2, %d", n, used, 2*cost)
	}
	first.Release()
	first.Release() // twice: the second does nothing
	if n, used := b.inUse.Load(), b.used.Load(); n != 1 || used != cost {
		t.Errorf("after a release: %d encoders, %d bytes; want 1, %d", n, used, cost)
	}
	third := p.Encoder(Brotli)
	if third == nil {
		t.Fatal("no encoder once one was released")
	}
	second.Release()
	third.Release()
	if n, used := b.inUse.Load(), b.used.Load(); n != 0 || used != 0 {
		t.Errorf("all released: %d encoders, %d bytes in use", n, used)
	}
}

// A budget smaller than one encoder still lets one through at a time:
// the level configured is not turned off altogether.
func TestEncoderBudgetAlwaysOne(t *testing.T) {
	p := mustNew(t, Config{BrotliLevel: 9})
	b := withBudget(p, 1<<20)
	enc := p.Encoder(Brotli)
	if enc == nil {
		t.Fatalf("no brotli 9 encoder (%d bytes) under a budget of 1 MiB with none in use", p.costs[Brotli])
	}
	if again := p.Encoder(Brotli); again != nil {
		t.Fatal("a second encoder past the budget")
	}
	enc.Release()
	if b.used.Load() != 0 {
		t.Fatalf("%d bytes in use after the release", b.used.Load())
	}
}

// The process's budget is what New's policies use; SetEncoderMemory
// changes it for all of them, and Encoders reports it.
func TestSetEncoderMemory(t *testing.T) {
	p := mustNew(t, Config{Encodings: []string{"gzip"}})
	if p.budget != encoders {
		t.Fatal("a new Policy does not draw on the process's budget")
	}
	old := SetEncoderMemory(p.costs[Gzip])
	t.Cleanup(func() { SetEncoderMemory(old) })
	before := Encoders()
	enc := p.Encoder(Gzip)
	if enc == nil {
		t.Fatal("no encoder within the budget")
	}
	if again := p.Encoder(Gzip); again != nil {
		again.Release()
		t.Fatal("an encoder past the budget")
	}
	mid := Encoders()
	enc.Release()
	after := Encoders()
	if mid.InUse != before.InUse+1 || mid.OverBudget != before.OverBudget+1 || after.InUse != before.InUse || after.Bytes != before.Bytes {
		t.Errorf("Encoders: before %+v, holding one %+v, after %+v", before, mid, after)
	}
	if SetEncoderMemory(0); EncoderMemory() != defaultEncoderMemory() {
		t.Errorf("SetEncoderMemory(0) left %d, want the default %d", EncoderMemory(), defaultEncoderMemory())
	}
}

// encoderWorst is what one encoder of key holds after a body of 1 MiB
// written 16 KiB at a time with no flush, its output drained after each
// write: the worst case encoderCost stands for.
func encoderWorst(key poolKey, n int) uint64 {
	body := htmlBody(1 << 20)
	var before, after runtime.MemStats
	settle := func(m *runtime.MemStats) {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(m)
	}
	encs := make([]*Encoder, n)
	settle(&before)
	for i := range encs {
		enc, err := newEncoder(key, nil)
		if err != nil {
			panic(err)
		}
		enc.reset()
		for off := 0; off < len(body); off += 16 << 10 {
			enc.Write(body[off:min(off+16<<10, len(body))])
			enc.Consume(len(enc.Output()))
		}
		encs[i] = enc
	}
	settle(&after)
	runtime.KeepAlive(encs)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

// TestEncoderCost holds what the budget counts an encoder for to what
// one holds at its worst, at the default levels, so that a library
// upgrade that grows its state shows here.
func TestEncoderCost(t *testing.T) {
	for _, key := range []poolKey{{Gzip, DefaultGzipLevel}, {Brotli, DefaultBrotliLevel}, {Zstd, int(zstd.SpeedFastest)}} {
		got, cost := encoderWorst(key, 4), encoderCost(key)
		t.Logf("%v level %d: %d KiB at worst, counted for %d KiB", key.coding, key.level, got>>10, cost>>10)
		if int64(got) > cost {
			t.Errorf("%v level %d holds %d KiB, more than the %d KiB the budget counts it for", key.coding, key.level, got>>10, cost>>10)
		}
	}
}
