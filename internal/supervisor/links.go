package supervisor

import (
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"relay/internal/backend"
)

// queueLen bounds the messages queued for one process; one that lets more
// pile up is restarted rather than allowed to stall the supervisor.
const queueLen = 4096

// links is the supervisor's side of every serving process's channel: what
// goes down to all of them, and the counters that come up.
type links struct {
	log    *slog.Logger
	bs     []*backend.Backend // the backends the supervisor checks
	config ConfigSource
	// maxEjected is the most breakers may hold out, in percent of the
	// backends: the bound every process keeps, kept here for them all.
	maxEjected int

	mu      sync.Mutex
	byProc  map[int]*link
	latest  map[int]*ProcessCounters   // the last counters each live process sent
	retired map[string]BackendCounters // what exited processes counted
}

// link is one process's channel and the messages queued for it.
type link struct {
	ch    *Channel
	queue chan Message
}

func newLinks(bs []*backend.Backend, config ConfigSource, maxEjected int, log *slog.Logger) *links {
	return &links{log: log, bs: bs, config: config, maxEjected: maxEjected, byProc: map[int]*link{},
		latest: map[int]*ProcessCounters{}, retired: map[string]BackendCounters{}}
}

// attach opens the channel of process i and returns the end the process
// inherits. The process first gets the configuration, then a snapshot of
// every backend's health, then every transition from then on.
func (l *links) attach(i int) (*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	mine, theirs := os.NewFile(uintptr(fds[0]), "channel"), os.NewFile(uintptr(fds[1]), "channel")
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return nil, err
	}
	lk := &link{ch: NewChannel(conn), queue: make(chan Message, queueLen)}
	l.mu.Lock()
	defer l.mu.Unlock()
	lk.queue <- Message{Kind: KindConfig, Config: &l.config}
	snap := &HealthUpdate{Snapshot: true}
	for _, b := range l.bs {
		snap.Backends = append(snap.Backends, BackendHealth{Name: b.Name, Up: b.Healthy()})
	}
	lk.queue <- Message{Kind: KindHealth, Health: snap}
	for _, b := range l.bs {
		if b.Ejected() {
			// Open, or half-open (its time over, so the new process sends
			// a probe and reports how it went): either way the supervisor
			// counts it against max_ejected_percent until a close.
			until := b.EjectedUntil()
			if until.IsZero() {
				until = time.Now()
			}
			lk.queue <- Message{Kind: KindBreaker, Breaker: BreakerOf(b, until)}
		}
	}
	l.dropLocked(i)
	l.byProc[i] = lk
	go func() {
		for m := range lk.queue {
			if lk.ch.Send(m) != nil {
				return // the process is gone, or its channel was closed
			}
		}
	}()
	go l.read(i, lk)
	return theirs, nil
}

// read takes in what process i sends until its channel ends.
func (l *links) read(i int, lk *link) {
	for {
		m, err := lk.ch.Recv()
		if err != nil {
			return
		}
		if m.Kind == KindBreaker {
			l.breakerChanged(i, m.Breaker)
			continue
		}
		if m.Kind != KindCounters {
			l.log.Warn("unexpected message from a serving process", "process", i, "kind", string(m.Kind))
			continue
		}
		l.mu.Lock()
		if l.byProc[i] == lk {
			c := *m.Counters
			c.Process = i
			l.latest[i] = &c
		}
		l.mu.Unlock()
	}
}

// detach ends the channel of process i.
func (l *links) detach(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(i)
}

// dropLocked ends and forgets the channel of process i, if any, keeping
// what it counted so totals never go backwards; l.mu is held.
func (l *links) dropLocked(i int) {
	lk := l.byProc[i]
	if lk == nil {
		return
	}
	close(lk.queue)
	lk.ch.Close() // also ends a write in progress to a process that stopped reading
	delete(l.byProc, i)
	if c := l.latest[i]; c != nil {
		for _, b := range c.Backends {
			r := l.retired[b.Name]
			r.Name = b.Name
			r.Served += b.Served
			r.Failures += b.Failures
			l.retired[b.Name] = r
		}
		delete(l.latest, i)
	}
}

// broadcast queues m for every process. It never blocks: a process whose
// queue is full loses its channel, and with it its place, and restarts.
func (l *links) broadcast(m Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.broadcastLocked(m)
}

func (l *links) broadcastLocked(m Message) {
	for i, lk := range l.byProc {
		select {
		case lk.queue <- m:
		default:
			l.log.Error("process fell behind on messages from the supervisor; its channel is closed so it restarts", "process", i)
			l.dropLocked(i)
		}
	}
}

// breakerChanged takes in a breaker that opened or closed in process from.
// Processes judge their own requests, so two may change the same breaker,
// or breakers of different backends, at the same moment; the supervisor
// decides. It applies the changes one at a time, in the order they
// arrive, on its own backends; refuses an opening that would hold out
// more than maxEjected percent of the backends (another process ejected
// one meanwhile); logs each change of state once; and sends its verdict to
// every process, the sender included. Every process applies the same
// verdicts in the same order, so all end where the supervisor is.
func (l *links) breakerChanged(from int, s *BreakerState) {
	var b *backend.Backend
	for _, c := range l.bs {
		if c.Name == s.Name {
			b = c
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b == nil {
		// Not a backend the supervisor knows: pass it on as it came.
		l.broadcastLocked(Message{Kind: KindBreaker, Breaker: s})
		return
	}
	verdict := *s
	switch {
	case s.Until == 0:
		if b.Ejected() {
			l.log.Info("circuit breaker closed", "backend", b.Name, "reason", s.Reason, "process", from)
		}
	case !b.EjectedUntil().IsZero():
		// Open already: another process saw it first. The later end stands.
	case b.Ejected():
		l.log.Warn("circuit breaker reopened", "backend", b.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	case backend.EjectionExceeds(l.bs, b, l.maxEjected):
		l.log.Warn("circuit breaker not opened: too many backends ejected already", "backend", b.Name,
			"reason", s.Reason, "process", from, "max_ejected_percent", l.maxEjected)
		verdict = BreakerState{Name: s.Name, Reason: "too many backends ejected already"}
	default:
		l.log.Warn("circuit breaker opened", "backend", b.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	}
	if verdict.Until != 0 && b.EjectedUntil().After(time.Unix(0, verdict.Until)) {
		verdict = *BreakerOf(b, b.EjectedUntil())
	}
	ApplyBreaker(b, &verdict)
	l.broadcastLocked(Message{Kind: KindBreaker, Breaker: &verdict})
}

// healthChanged sends one backend's transition to every process.
func (l *links) healthChanged(b *backend.Backend, up bool) {
	l.broadcast(Message{Kind: KindHealth, Health: &HealthUpdate{Backends: []BackendHealth{{Name: b.Name, Up: up}}}})
}

// totals sums the counters of every process, living ones as last reported
// and exited ones as they last reported before exiting, by backend name.
// Served and failures never go backwards; in flight counts living
// processes only.
func (l *links) totals() []BackendCounters {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := map[string]BackendCounters{}
	for name, r := range l.retired {
		sum[name] = r
	}
	for _, c := range l.latest {
		for _, b := range c.Backends {
			s := sum[b.Name]
			s.Name = b.Name
			s.Served += b.Served
			s.Failures += b.Failures
			s.InFlight += b.InFlight
			sum[b.Name] = s
		}
	}
	out := make([]BackendCounters, 0, len(sum))
	for _, s := range sum {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
