package control

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/stats"
	"relay/internal/supervisor"
	"relay/internal/testsock"
)

// TestCountersAreNumberedInReadOrder: collect answers and reports are read
// by two goroutines at once; each reading's number follows the order of
// the readings themselves, so the control can tell the later one.
func TestCountersAreNumberedInReadOrder(t *testing.T) {
	a, b := testsock.Pair(t)
	sup := supervisor.NewChannel(b)
	if err := sup.Send(supervisor.Message{Kind: supervisor.KindConfig, Config: &supervisor.ConfigSource{Generation: 1}}); err != nil {
		t.Fatal(err)
	}
	p, err := supervisor.Attached(0, nil, a)
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Uint64
	read := func() *stats.Process {
		st := &stats.Process{ConnsAccepted: reads.Add(1)}
		runtime.Gosched() // a reading takes a while: the other may read meanwhile
		return st
	}
	if err := sup.Send(supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{Snapshot: true}}); err != nil {
		t.Fatal(err)
	}
	if err := follow(p, nil, Updates{Stats: read}); err != nil {
		t.Fatal(err)
	}
	stop := p.ReportCounters(time.Microsecond, read)
	defer func() {
		sup.Close() // the last report then fails at once
		stop()
	}()
	const collects = 300
	go func() {
		for i := range collects {
			sup.Send(supervisor.Message{Kind: supervisor.KindCollect, Collect: uint64(i + 1)})
		}
	}()
	for answered := 0; answered < collects; {
		m, err := sup.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.Reading != m.Counters.ConnsAccepted {
			t.Fatalf("reading %d was numbered %d", m.Counters.ConnsAccepted, m.Reading)
		}
		if m.Collect != 0 {
			answered++
		}
	}
}
