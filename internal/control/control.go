package control

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// queueLen bounds the messages queued for one process; one that lets more
// pile up is restarted rather than allowed to stall the
const queueLen = 4096

// Control is what makes several serving processes one relay: the one home
// of what must be global. It holds the configuration generation, the
// pool's membership, the backends it checks (their health, breakers and
// operator state are the truth every process follows), each process's
// channel, and what processes counted. Down every channel go the
// configuration, membership, health transitions, breaker verdicts and
// operator actions; up come breaker changes and counters. With one
// process it runs in that process, over the same channel, so relay
// behaves the same however many processes serve.
type Control struct {
	// Prepare, when set before the control is shared, checks that a
	// backend of a membership change can be readied for use (its TLS
	// settings) and returns the step that readies it, which cannot fail:
	// a change runs every check before any step.
	Prepare func(*backend.Backend) (ready func(), err error)

	log *slog.Logger
	// maxEjected is the most breakers may hold out, in percent of the
	// backends: the bound every process keeps, kept here for them all.
	maxEjected int

	changing sync.Mutex // serialises membership changes (operate.go)

	// own is relay's own addresses, refused as backends (self.go).
	own own

	mu      sync.Mutex
	config  supervisor.ConfigSource
	members []supervisor.Member // the pool's membership now
	// discovered is the last set etcd gave (discovered.go), the file's
	// and the API's URLs included: a weight etcd still gives leaves an
	// operator's in place, and a member left out comes in when the
	// file's or the API's entry goes.
	discovered []supervisor.Member
	bs         []*backend.Backend // the backends checked here, in members' order
	// targets hands the active checks the backends to check after a
	// membership change; nil until SetTargets.
	targets func([]*backend.Backend)
	byProc  map[int]*link
	// latest holds the last counters each process sent, by its link,
	// until the link's reader ends and they move to retired.
	latest  map[*link]*stats.Process
	retired stats.Process // what exited processes counted
	// ejections counts breaker openings by backend name.
	ejections map[string]uint64
	reloads   [2]uint64 // reloads applied, refused
	collect   collector
}

// link is one process's channel and the messages queued for it.
type link struct {
	ch    *supervisor.Channel
	queue chan supervisor.Message
	// reading is the number of the process's latest counters
	// (Message.Reading); guarded by the Control's mutex.
	reading uint64
	done    chan struct{} // closed when the reader has ended
}

// NewControl returns the control of a relay that starts with config,
// whose pool is bs (the members of config, checked here). maxEjected is
// max_ejected_percent.
func NewControl(config supervisor.ConfigSource, bs []*backend.Backend, maxEjected int, log *slog.Logger) *Control {
	config.TicketKeys = nextTicketKeys(nil)
	config.Instance = newInstance()
	c := &Control{log: log, config: config, bs: bs, maxEjected: maxEjected, byProc: map[int]*link{},
		latest: map[*link]*stats.Process{}, ejections: map[string]uint64{}}
	c.members = make([]supervisor.Member, len(bs))
	for i, b := range bs {
		c.members[i] = supervisor.Member{URL: b.Name, Weight: b.Weight, MaxRequests: b.MaxRequests()}
	}
	return c
}

// SetTargets gives the control the function that tells the active checks
// which backends to check; membership changes call it.
func (c *Control) SetTargets(set func([]*backend.Backend)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets = set
}

// Attach opens the channel of process i and returns the end the process
// inherits. The process first gets the configuration, then a snapshot of
// every backend's health, then every transition from then on.
func (l *Control) Attach(i int) (*os.File, error) {
	ch, theirs, err := supervisor.NewPair()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.startLocked()
	// The queue holds the start and queueLen more, so queueing the start
	// never blocks, however many backends are ejected, drained or
	// disabled, and a process that falls behind later still has queueLen.
	lk := &link{ch: ch, queue: make(chan supervisor.Message, len(start)+queueLen), done: make(chan struct{})}
	for _, m := range start {
		lk.queue <- m
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

// startLocked is what a process gets first: the configuration, the
// membership, every backend's health, then the breakers that are open or
// half-open and the operator state of backends drained or disabled; l.mu
// is held.
func (l *Control) startLocked() []supervisor.Message {
	config := l.config
	ms := []supervisor.Message{
		{Kind: supervisor.KindConfig, Config: &config},
		{Kind: supervisor.KindMembership, Membership: append([]supervisor.Member(nil), l.members...)},
	}
	snap := &supervisor.HealthUpdate{Snapshot: true}
	for _, b := range l.bs {
		snap.Backends = append(snap.Backends, supervisor.BackendHealth{Name: b.Name, Up: b.Healthy()})
	}
	ms = append(ms, supervisor.Message{Kind: supervisor.KindHealth, Health: snap})
	for _, b := range l.bs {
		if b.Ejected() {
			// Open, or half-open (its time over, so the new process sends
			// a probe and reports how it went): either way the supervisor
			// counts it against max_ejected_percent until a close.
			until := b.EjectedUntil()
			if until.IsZero() {
				until = time.Now()
			}
			ms = append(ms, supervisor.Message{Kind: supervisor.KindBreaker, Breaker: BreakerOf(b, until)})
		}
		if b.Draining() || b.Disabled() {
			ms = append(ms, supervisor.Message{Kind: supervisor.KindOperator, Operator: operatorOf(b)})
		}
	}
	return ms
}

// Local attaches the serving side of a relay that runs as one process:
// the same channel a serving process inherits, both ends in this process,
// so one process follows the control exactly as each of several does.
func (l *Control) Local(ln net.Listener) (*supervisor.Process, error) {
	f, err := l.Attach(0)
	if err != nil {
		return nil, err
	}
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		l.Detach(0)
		return nil, err
	}
	p, err := supervisor.Attached(0, ln, conn)
	if err != nil {
		l.Detach(0)
		return nil, err
	}
	return p, nil
}

// read takes in what process i sends until its channel ends, then
// retires what the process counted.
func (l *Control) read(i int, lk *link) {
	defer close(lk.done)
	for {
		m, err := lk.ch.Recv()
		if err != nil {
			l.ended(i, lk, err)
			return
		}
		switch m.Kind {
		case supervisor.KindBreaker:
			l.breakerChanged(i, m.Breaker)
		case supervisor.KindCounters:
			l.counted(i, lk, &m)
		default:
			l.log.Warn("unexpected message from a serving process", "process", i, "kind", string(m.Kind))
		}
	}
}

// counted keeps the counters process i sent over lk, unless it holds a
// later reading already, and notes the collect they answer.
func (l *Control) counted(i int, lk *link, m *supervisor.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	current := l.byProc[i] == lk
	if m.Reading >= lk.reading { // else it holds a later one
		lk.reading = m.Reading
		if !current {
			m.Counters.Retire() // sent as the process ended
		}
		l.latest[lk] = m.Counters
	}
	if current {
		l.collect.arrived(i, m.Collect)
	}
}

// ended takes the end of what process i sends over lk; err says why it
// ended. A channel that ends while it is still the process's broke: the
// process closed it (it is exiting) or sent what cannot be read. It is
// dropped then, so that collects stop waiting for the process and the
// process, whose end of the channel ends too, stops and is started
// afresh. Either way nothing more can come, and what the process counted
// joins what exited processes counted.
func (l *Control) ended(i int, lk *link, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byProc[i] == lk {
		if !errors.Is(err, io.EOF) {
			l.log.Error("the channel from a serving process broke; it is closed so that the process restarts", "process", i, "err", err)
		}
		l.dropLocked(i)
	}
	if c := l.latest[lk]; c != nil {
		c.Retire()
		l.retired.Add(c)
		delete(l.latest, lk)
	}
}

// drainWait bounds how long detach reads what a process sent before it
// exited. Its end of the channel closed as it exited, so the reader finds
// the end of the channel at once; the bound is for a channel some other
// process still holds open.
const drainWait = 500 * time.Millisecond

// Detach ends the channel of process i, which exited. What it sent before
// it ended is still taken in, its last counters among them (a process
// reports as it stops), up to the end of the channel or drainWait; detach
// returns once they count among what exited processes counted.
func (l *Control) Detach(i int) {
	l.mu.Lock()
	lk := l.byProc[i]
	if lk != nil {
		l.unlinkLocked(i, lk)
	}
	l.mu.Unlock()
	if lk == nil {
		return
	}
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-lk.done:
	case <-t.C:
	}
	lk.ch.Close()
	<-lk.done // a reader ends as soon as its channel is closed
}

// dropLocked ends and forgets the channel of process i, if any, at once;
// its reader then ends and keeps what the process counted, so totals
// never go backwards. l.mu is held.
func (l *Control) dropLocked(i int) {
	if lk := l.byProc[i]; lk != nil {
		l.unlinkLocked(i, lk)
		lk.ch.Close() // also ends a write in progress to a process that stopped reading
	}
}

// unlinkLocked makes lk no longer process i's channel: nothing more is
// queued for it, no collect waits for it, and its counters lose their
// gauges, which end with the process. Its reader goes on until the
// channel ends. l.mu is held.
func (l *Control) unlinkLocked(i int, lk *link) {
	delete(l.byProc, i)
	close(lk.queue)
	if c := l.latest[lk]; c != nil {
		c.Retire()
	}
	l.collect.arrived(i, 0) // nothing more will come from it
}

// broadcast queues m for every process. It never blocks: a process whose
// queue is full loses its channel, and with it its place, and restarts.
func (l *Control) broadcast(m supervisor.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.broadcastLocked(m)
}

func (l *Control) broadcastLocked(m supervisor.Message) {
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
func (l *Control) breakerChanged(from int, s *supervisor.BreakerState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.backendLocked(s.Name)
	if b == nil {
		// Not a backend the supervisor knows: pass it on as it came.
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: s})
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
		l.ejections[b.Name]++
		l.log.Warn("circuit breaker reopened", "backend", b.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	case backend.EjectionExceeds(l.bs, b, l.maxEjected):
		l.log.Warn("circuit breaker not opened: too many backends ejected already", "backend", b.Name,
			"reason", s.Reason, "process", from, "max_ejected_percent", l.maxEjected)
		verdict = supervisor.BreakerState{Name: s.Name, Reason: "too many backends ejected already"}
	default:
		l.ejections[b.Name]++
		l.log.Warn("circuit breaker opened", "backend", b.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	}
	if verdict.Until != 0 && b.EjectedUntil().After(time.Unix(0, verdict.Until)) {
		verdict = *BreakerOf(b, b.EjectedUntil())
	}
	ApplyBreaker(b, &verdict)
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: &verdict})
}

// HealthChanged sends one backend's transition to every process.
func (l *Control) HealthChanged(b *backend.Backend, up bool) {
	l.broadcast(supervisor.Message{Kind: supervisor.KindHealth, Health: &supervisor.HealthUpdate{Backends: []supervisor.BackendHealth{{Name: b.Name, Up: up}}}})
}

// backendLocked returns the checked backend named name, or nil; l.mu is
// held.
func (l *Control) backendLocked(name string) *backend.Backend {
	for _, b := range l.bs {
		if b.Name == name {
			return b
		}
	}
	return nil
}
