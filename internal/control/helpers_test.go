package control

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/health"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

const ioTimeout = 10 * time.Second

func newBackends(t *testing.T, urls ...string) []*backend.Backend {
	t.Helper()
	bs := make([]*backend.Backend, len(urls))
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if bs[i], err = backend.New(u, 1); err != nil {
			t.Fatal(err)
		}
	}
	return bs
}

// attachProcess opens process i's channel the way the supervisor does and
// returns the process's side of it, its configuration already read.
func attachProcess(t *testing.T, l *Control, i int) *supervisor.Process {
	t.Helper()
	p, _ := attachRaw(t, l, i)
	return p
}

// attachRaw is attachProcess that also returns the connection under the
// process's channel, for writing what no Channel would send.
func attachRaw(t *testing.T, l *Control, i int) (*supervisor.Process, net.Conn) {
	t.Helper()
	f, err := l.Attach(i)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := supervisor.Attached(i, nil, c)
	if err != nil {
		t.Fatalf("attaching process %d: %v", i, err)
	}
	return p, c
}

// TestProcessFollowsTheSupervisor runs both sides: a process gets the
// configuration and the health snapshot, then transitions and operator
// state, which land on its own backends of the same names.
func TestProcessFollowsTheSupervisor(t *testing.T) {
	checked := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
	checked[1].SetHealthy(false)
	src := supervisor.ConfigSource{Generation: 1, Name: "relay.yml", Data: []byte("x: 1\n")}
	l := NewControl(src, checked, 50, slog.New(slog.DiscardHandler))
	p := attachProcess(t, l, 0)
	// The control adds the session-ticket keys every process shares.
	got := p.Config
	if len(got.TicketKeys) != 1 || len(got.TicketKeys[0]) != supervisor.TicketKeyLen {
		t.Errorf("process got %d ticket keys, want one of %d bytes", len(got.TicketKeys), supervisor.TicketKeyLen)
	}
	got.TicketKeys = nil
	// And relay's instance id, the same for every process.
	if len(got.Instance) != 2*instanceBytes || got.Instance != l.config.Instance {
		t.Errorf("process got instance id %q, want the control's %q", got.Instance, l.config.Instance)
	}
	got.Instance = ""
	// And the key of sticky cookies.
	if len(got.StickyKey) != stickyKeyBytes || string(got.StickyKey) != string(l.config.StickyKey) {
		t.Errorf("process got sticky key %x, want the control's %x", got.StickyKey, l.config.StickyKey)
	}
	got.StickyKey = nil
	if !reflect.DeepEqual(got, src) {
		t.Fatalf("process got configuration %+v, want %+v", got, src)
	}
	served := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003")
	ended := make(chan error, 1)
	if err := follow(p, served, Updates{Ended: func(err error) { ended <- err }}); err != nil {
		t.Fatal(err)
	}
	if !served[0].Healthy() || served[1].Healthy() || !served[2].Healthy() {
		t.Fatalf("after the snapshot: %v %v %v, want up, down, up (a name the supervisor does not check is left alone)",
			served[0].Healthy(), served[1].Healthy(), served[2].Healthy())
	}
	l.healthChanged(checked[1], true)
	if err := l.Drain("default", checked[0].Name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the transition and the drain", func() bool {
		return served[1].Healthy() && served[0].Draining()
	})
	l.Detach(0)
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("ended with %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("the process did not see its channel end")
	}
}

// TestSlowProcessLosesItsChannel: a process that stops reading cannot
// stall the supervisor; its queue fills and it loses its channel.
func TestSlowProcessLosesItsChannel(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	slow := attachProcess(t, l, 0) // never reads again
	done := make(chan struct{})
	go func() {
		// Far more than the queue and the socket buffers hold.
		for i := range queueLen * 40 {
			l.healthChanged(bs[0], i%2 == 0)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(ioTimeout):
		t.Fatal("broadcasting blocked on a process that does not read")
	}
	l.mu.Lock()
	_, slowAttached := l.byProc[0]
	l.mu.Unlock()
	if slowAttached {
		t.Fatal("the slow process kept its channel")
	}
	// Its side ends once it reads what was buffered.
	for {
		if _, err := slow.Recv(); err != nil {
			break
		}
	}
}

// TestCountersSumOverProcesses: a collect gets every process's counters
// as of that moment and sums them; a process that exits keeps what it
// counted in the sums, so counters never go backwards, while its gauges
// (in flight) end with it.
func TestCountersSumOverProcesses(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	procs := []*supervisor.Process{attachProcess(t, l, 0), attachProcess(t, l, 1)}
	own := [][]*backend.Backend{newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002"), newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")}
	for i, n := range []int{3, 5} {
		for range n {
			own[i][0].Acquire()
			own[i][0].Release()
			own[i][0].Requests.Observe(0, 200, time.Millisecond, 0, 10)
		}
		own[i][1].Acquire() // one in flight each
		own[i][1].Fail()
	}
	read := func(i int) func() *stats.Process {
		return func() *stats.Process {
			st := &stats.Process{ConnsAccepted: uint64(i + 1)}
			for _, b := range own[i] {
				st.Backends = append(st.Backends, stats.Backend{Name: b.Name, InFlight: b.InFlight(),
					Served: b.Served(), Failures: b.Failures(), Requests: b.Requests.Read()})
			}
			return st
		}
	}
	for i, p := range procs {
		if err := follow(p, own[i], Updates{Stats: read(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	got := l.Stats(ctx)
	if got.ConnsAccepted != 3 || len(got.Backends) != 2 {
		t.Fatalf("collected %+v, want both processes' counters", got)
	}
	b0, b1 := got.Backends[0], got.Backends[1]
	if b0.Served != 8 || b0.Requests.Total() != 8 || b0.Requests.BytesOut != 80 || b1.Served != 2 || b1.Failures != 2 || b1.InFlight != 2 {
		t.Fatalf("collected %+v and %+v; want 8 served and answered to the first, 2 served, failed and in flight to the second", b0, b1)
	}
	procs[1].Close() // process 1 exits
	l.Detach(1)
	got = l.Stats(ctx)
	if b0, b1 := got.Backends[0], got.Backends[1]; b0.Served != 8 || b1.Served != 2 || b1.InFlight != 1 {
		t.Fatalf("after process 1 exited: %+v and %+v; want its counts kept and its request in flight gone", b0, b1)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// follow makes p follow the control with bs as its backends: each member
// gets the backend of its URL in bs, whatever its pool (none when bs has
// none).
func follow(p *supervisor.Process, bs []*backend.Backend, u Updates) error {
	return Follow(p, planeFunc(func(ms []supervisor.Member) []*backend.Backend {
		out := make([]*backend.Backend, len(ms))
		for i, m := range ms {
			for _, b := range bs {
				if b.Name == m.URL {
					out[i] = b
				}
			}
		}
		return out
	}), u)
}

// planeFunc is a data plane that takes every membership: the function
// returns each member's backend.
type planeFunc func([]supervisor.Member) []*backend.Backend

func (f planeFunc) SetMembers(ms []supervisor.Member) ([]*backend.Backend, error) { return f(ms), nil }

// defaultPool is the rules of a relay with one pool, default, whose
// max_ejected_percent is maxEjected.
func defaultPool(maxEjected int) []PoolRules {
	return []PoolRules{{Name: DefaultPool, MaxEjectedPercent: maxEjected}}
}

// recordChecks is active checks that probe nothing: each time the control
// hands them their targets, set gets them.
func recordChecks(set func([]*backend.Backend)) StartChecks {
	return func(_ health.Config, targets []*backend.Backend, _ func(*backend.Backend, bool)) (Checker, error) {
		set(targets)
		return setOnly(set), nil
	}
}

// setOnly is a Checker that hands its targets to a function.
type setOnly func([]*backend.Backend)

func (s setOnly) Set(targets []*backend.Backend) { s(targets) }
func (s setOnly) Stop()                          {}
