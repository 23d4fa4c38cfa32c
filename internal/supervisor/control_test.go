package supervisor

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"
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
	l := NewControl(ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	attached := make(chan *os.File, 1)
	go func() {
		f, err := l.attach(0)
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
	p := &Process{ch: NewChannel(c)}
	// More broadcasts than the process reads for now: it keeps its place.
	for range queueLen / 2 {
		l.HealthChanged(bs[0], false)
	}
	l.mu.Lock()
	_, kept := l.byProc[0]
	l.mu.Unlock()
	if !kept {
		t.Fatal("the process lost its channel: its start left no room in its queue")
	}
	for _, k := range []Kind{KindConfig, KindMembership, KindHealth} {
		if m, err := p.ch.Recv(); err != nil || m.Kind != k {
			t.Fatalf("got %+v, %v; want a %q message", m.Kind, err, k)
		}
	}
	for i := range bs {
		m, err := p.ch.Recv()
		if err != nil || m.Kind != KindOperator || m.Operator.Name != bs[i].Name || !m.Operator.Disabled {
			t.Fatalf("message %d of the start: %+v, %v; want %s disabled", i, m, err, bs[i].Name)
		}
	}
}
