package control

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
	"relay/internal/supervisor"
	"relay/internal/testlog"
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

// refusing is a data plane that refuses every membership after the
// first, keeping the backends of the first.
type refusing struct {
	bs    []*backend.Backend
	calls int
}

func (r *refusing) SetMembers(ms []supervisor.Member) ([]*backend.Backend, error) {
	r.calls++
	if r.calls > 1 {
		return r.bs, errors.New(`pool "default": backend "http://": no host`)
	}
	return r.bs, nil
}

// TestFollowKeepsMembersTheDataPlaneRefuses: a membership the data plane
// refuses is logged once, and the health that follows it still reaches
// the backends the plane kept.
func TestFollowKeepsMembersTheDataPlaneRefuses(t *testing.T) {
	a, b := testsock.Pair(t)
	sup := supervisor.NewChannel(b)
	send := func(m supervisor.Message) {
		t.Helper()
		if err := sup.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(supervisor.Message{Kind: supervisor.KindConfig, Config: &supervisor.ConfigSource{Generation: 1}})
	p, err := supervisor.Attached(0, nil, a)
	if err != nil {
		t.Fatal(err)
	}
	const url = "http://127.0.0.1:8001"
	plane := &refusing{bs: newBackends(t, url)}
	health := func(up, snapshot bool) supervisor.Message {
		return supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{Snapshot: snapshot,
			Backends: []supervisor.BackendHealth{{Pool: DefaultPool, Name: url, Up: up}}}}
	}
	send(supervisor.Message{Kind: supervisor.KindMembership, Membership: []supervisor.Member{{Pool: DefaultPool, URL: url, Weight: 1}}})
	send(health(false, true))
	log, logged := testlog.New()
	if err := Follow(p, plane, Updates{Log: log}); err != nil {
		t.Fatal(err)
	}
	if plane.bs[0].Healthy() {
		t.Fatal("the snapshot did not reach the backend")
	}
	send(supervisor.Message{Kind: supervisor.KindMembership, Membership: []supervisor.Member{{Pool: DefaultPool, URL: url, Weight: 1}, {Pool: DefaultPool, URL: "http://", Weight: 1}}})
	send(health(true, false))
	waitFor(t, "the transition after the refused membership", plane.bs[0].Healthy)
	if n := logged.Count("membership from the supervisor refused"); n != 1 || !strings.Contains(logged.String(), "no host") {
		t.Errorf("logged %d refusals, want 1 naming what is wrong:\n%s", n, logged)
	}
}
