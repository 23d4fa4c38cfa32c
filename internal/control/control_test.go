package control

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"relay/internal/testlog"
	"testing"
	"time"

	"relay/internal/stats"
	"relay/internal/supervisor"
)

// TestAttachQueuesTheStartOfAnyPool: a process's start (configuration,
// membership, health, then a message per drained or disabled backend) is
// queued whole however many backends are taken out, without blocking the
// control, and the process still has a full queue for what follows.
func TestAttachQueuesTheStartOfAnyPool(t *testing.T) {
	urls := make([]string, queueLen)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://10.0.%d.%d:80", i/250, i%250+1)
	}
	bs := newBackends(t, urls...)
	for _, b := range bs {
		b.SetDisabled(true)
	}
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	attached := make(chan *os.File, 1)
	go func() {
		f, err := l.Attach(0)
		if err != nil {
			t.Error(err)
		}
		attached <- f
	}()
	var f *os.File
	select {
	case f = <-attached:
	case <-time.After(ioTimeout):
		t.Fatal("attach blocked queueing the start of a process")
	}
	if f == nil {
		t.FailNow()
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := supervisor.NewChannel(c)
	// More broadcasts than the process reads for now: it keeps its place.
	for range queueLen / 2 {
		l.healthChanged(bs[0], false)
	}
	l.mu.Lock()
	_, kept := l.byProc[0]
	l.mu.Unlock()
	if !kept {
		t.Fatal("the process lost its channel: its start left no room in its queue")
	}
	for _, k := range []supervisor.Kind{supervisor.KindConfig, supervisor.KindMembership, supervisor.KindHealth} {
		if m, err := p.Recv(); err != nil || m.Kind != k {
			t.Fatalf("got %+v, %v; want a %q message", m.Kind, err, k)
		}
	}
	for i := range bs {
		m, err := p.Recv()
		if err != nil || m.Kind != supervisor.KindOperator || m.Operator.Name != bs[i].Name || !m.Operator.Disabled {
			t.Fatalf("message %d of the start: %+v, %v; want %s disabled", i, m, err, bs[i].Name)
		}
	}
}

// TestCountersNeverGoBackwards: a process reads its counters for collect
// answers and for its reports in two goroutines, so a reading can reach
// the control after a later one. The control keeps the later reading
// either way: an answer read before a report but sent after it still
// answers the collect, and a report read before an answer but sent after
// it does not undo the answer.
func TestCountersNeverGoBackwards(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	p := attachProcess(t, l, 0)
	counters := func(reading, accepted uint64) supervisor.Message {
		return supervisor.Message{Kind: supervisor.KindCounters, Reading: reading, Counters: &stats.Process{ConnsAccepted: accepted}}
	}
	// scrape collects once, the process answering as answer says.
	scrape := func(answer func(collect uint64)) uint64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		got := make(chan uint64, 1)
		go func() { got <- l.Stats(ctx).ConnsAccepted }()
		for {
			m, err := p.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == supervisor.KindCollect {
				answer(m.Collect)
				return <-got
			}
		}
	}

	// An answer read (1) before a report (2) reaches the control last.
	n := scrape(func(collect uint64) {
		p.Send(counters(2, 150))
		m := counters(1, 100)
		m.Collect = collect
		p.Send(m)
	})
	if n != 150 {
		t.Fatalf("the scrape counted %d accepted connections; want the later reading's 150", n)
	}

	// A report read (3) before an answer (4) reaches the control last.
	if n = scrape(func(collect uint64) {
		m := counters(4, 200)
		m.Collect = collect
		p.Send(m)
	}); n != 200 {
		t.Fatalf("the scrape counted %d accepted connections; want 200", n)
	}
	p.Send(counters(3, 170))
	// A breaker change the control does not know comes back to the
	// process as it went, once the report before it was taken in.
	p.Send(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: &supervisor.BreakerState{Name: "http://sync"}})
	for {
		m, err := p.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == supervisor.KindBreaker {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the process does not answer now: the scrape reads what it has
	if n := l.Stats(ctx).ConnsAccepted; n != 200 {
		t.Fatalf("connections accepted went from 200 to %d between scrapes", n)
	}
}

// TestLastCountersOutliveTheProcess: a process reports its counters as it
// stops, then exits. Whether the control takes the report in before or
// after it handles the exit, those counts stay in relay's totals, once,
// and a process started again in its place adds its own.
func TestLastCountersOutliveTheProcess(t *testing.T) {
	last := supervisor.Message{Kind: supervisor.KindCounters, Reading: 1, Counters: &stats.Process{ConnsAccepted: 5, ConnsOpen: 1}}
	for round := range 20 {
		l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
		p := attachProcess(t, l, 0)
		p.Send(last)
		p.Close()   // the process exits
		l.Detach(0) // its exit is handled at once
		if st := l.Stats(context.Background()); st.ConnsAccepted != 5 || st.ConnsOpen != 0 {
			t.Fatalf("round %d: after the exit relay counts %d accepted and %d open connections; want the last report's 5, none open",
				round, st.ConnsAccepted, st.ConnsOpen)
		}
	}

	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	p := attachProcess(t, l, 0)
	l.mu.Lock()
	lk := l.byProc[0]
	l.mu.Unlock()
	p.Send(last)
	p.Close()
	select {
	case <-lk.done: // the control found the end of the channel first
	case <-time.After(ioTimeout):
		t.Fatal("the control did not see the channel of a process that exited end")
	}
	l.Detach(0)
	if n := l.Stats(context.Background()).ConnsAccepted; n != 5 {
		t.Fatalf("after the exit relay counts %d accepted connections; want the last report's 5", n)
	}
	again := attachProcess(t, l, 0)
	err := follow(again, newBackends(t, "http://127.0.0.1:8001"), Updates{Stats: func() *stats.Process {
		return &stats.Process{ConnsAccepted: 3}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if n := l.Stats(ctx).ConnsAccepted; n != 8 {
		t.Fatalf("with the process started again relay counts %d accepted connections; want 5 and its 3", n)
	}
}

// TestABrokenChannelRestartsItsProcess: when what a process sends cannot
// be read, the control says so and closes the channel, so the process
// sees it end (and stops, to be started afresh) and scrapes do not wait
// for it.
func TestABrokenChannelRestartsItsProcess(t *testing.T) {
	log, logs := testlog.New()
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, log)
	p, conn := attachRaw(t, l, 0)
	ended := make(chan error, 1)
	err := follow(p, newBackends(t, "http://127.0.0.1:8001"), Updates{
		Stats: func() *stats.Process { return &stats.Process{ConnsAccepted: 1} },
		Ended: func(err error) { ended <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("not a message\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(ioTimeout):
		t.Fatal("the process's channel stayed open after it broke")
	}
	if n := logCount(logs, "the channel from a serving process broke"); n != 1 {
		t.Errorf("%d log lines about the broken channel, want 1:\n%s", n, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	l.Stats(ctx)
	if ctx.Err() != nil {
		t.Fatal("a scrape waited for a process whose channel broke")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byProc) != 0 {
		t.Fatalf("the process whose channel broke is still attached: %v", l.byProc)
	}
}
