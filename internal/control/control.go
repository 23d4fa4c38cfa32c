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
	"relay/internal/health"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// queueLen bounds the messages queued for one process; one that lets more
// pile up is restarted rather than allowed to stall the
const queueLen = 4096

// Control is what makes several serving processes one relay: the one home
// of what must be global. It holds the configuration generation, every
// pool's membership, the backends it checks (their health, breakers and
// operator state are the truth every process follows), each process's
// channel, and what processes counted. Down every channel go the
// configuration, membership, health transitions, breaker verdicts and
// operator actions; up come breaker changes and counters. With one
// process it runs in that process, over the same channel, so relay
// behaves the same however many processes serve.
//
// One address is one backend.Host across pools: a pool's member is a
// backend.Backend over it. Breakers are the address's, so a verdict holds
// it out of every pool; the max_ejected_percent bound is each pool's;
// operator actions and check verdicts are a membership's.
type Control struct {
	// Prepare, when set before the control is shared, checks that a
	// backend of a membership change can be readied for use (its TLS
	// settings) and returns the step that readies it, which cannot fail:
	// a change runs every check before any step.
	Prepare func(*backend.Backend) (ready func(), err error)

	log *slog.Logger
	// startChecks starts the active checks of one check setting; nil
	// runs none (checks.go).
	startChecks StartChecks

	changing sync.Mutex // serialises membership changes (operate.go)

	// own is relay's own addresses, refused as backends (self.go).
	own own

	mu     sync.Mutex
	config supervisor.ConfigSource
	// pools are the pools' rules, in the order their members are held.
	pools   []PoolRules
	members []supervisor.Member // every pool's membership now
	// discovered is the last set etcd gave (discovered.go), the file's
	// and the API's URLs included: a weight etcd still gives leaves an
	// operator's in place, and a member left out comes in when the
	// file's or the API's entry goes.
	discovered []supervisor.Member
	bs         []*backend.Backend // the members' backends, in members' order
	// hosts are the addresses of bs by name, one per address whichever
	// pools hold it.
	hosts map[string]*backend.Host
	// checks are the active checks by their settings (checks.go).
	checks map[health.Config]*checkGroup
	byProc map[int]*link
	// latest holds the last counters each process sent, by its link,
	// until the link's reader ends and they move to retired.
	latest  map[*link]*stats.Process
	retired stats.Process // what exited processes counted
	// ejections counts breaker openings by address.
	ejections map[string]uint64
	reloads   [2]uint64 // reloads applied, refused
	collect   collector
	// certs are the ACME certificates published, by first name;
	// challenges answers asks, at most len(asks) at once
	// (certificates.go).
	certs map[string]heldCertificate
	acme  ACME
	asks  chan struct{}
	// looking are the asks waiting for each host's lookup; asksWarned
	// when "too many" was last logged.
	looking    map[string][]func(found bool, data []byte)
	asksWarned time.Time
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

// Options are what New needs.
type Options struct {
	// Source is the configuration relay starts with.
	Source supervisor.ConfigSource
	// Pools are the pools' rules, Members their members (each naming one
	// of Pools).
	Pools   []PoolRules
	Members []supervisor.Member
	// Prepare becomes Control.Prepare.
	Prepare func(*backend.Backend) (ready func(), err error)
	// StartChecks starts active checks; nil runs none.
	StartChecks StartChecks
	Log         *slog.Logger
}

// New returns the control of a relay that starts with o.Source, holding
// o.Members; the active checks have probed every member once when it
// returns.
func New(o Options) (*Control, error) {
	c := newControl(o.Source, o.Log)
	c.Prepare, c.startChecks = o.Prepare, o.StartChecks
	if err := c.checkPools(o.Pools); err != nil {
		return nil, err
	}
	c.pools = o.Pools
	if err := c.change(func([]supervisor.Member) ([]supervisor.Member, error) { return o.Members, nil }); err != nil {
		c.StopChecks()
		return nil, err
	}
	return c, nil
}

// NewControl returns the control of a relay with one pool, "default",
// whose members are bs as they are (their state included), and no active
// checks; maxEjected is its max_ejected_percent. Tests and tools use it.
func NewControl(config supervisor.ConfigSource, bs []*backend.Backend, maxEjected int, log *slog.Logger) *Control {
	c := newControl(config, log)
	c.pools = []PoolRules{{Name: DefaultPool, MaxEjectedPercent: maxEjected}}
	c.bs = bs
	c.members = make([]supervisor.Member, len(bs))
	for i, b := range bs {
		c.members[i] = supervisor.Member{Pool: DefaultPool, URL: b.Name, Weight: b.Weight, MaxRequests: b.MaxRequests()}
		c.hosts[b.Name] = b.Host
	}
	return c
}

func newControl(config supervisor.ConfigSource, log *slog.Logger) *Control {
	config.TicketKeys = nextTicketKeys(nil)
	config.Instance = newInstance()
	config.StickyKey = newStickyKey()
	return &Control{log: log, config: config, byProc: map[int]*link{}, hosts: map[string]*backend.Host{},
		checks: map[health.Config]*checkGroup{}, latest: map[*link]*stats.Process{}, ejections: map[string]uint64{}}
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
// membership, every member's health, then the breakers that are open or
// half-open and the operator state of members drained or disabled; l.mu
// is held.
func (l *Control) startLocked() []supervisor.Message {
	config := l.config
	ms := []supervisor.Message{
		{Kind: supervisor.KindConfig, Config: &config},
		{Kind: supervisor.KindMembership, Membership: append([]supervisor.Member{}, l.members...)},
	}
	snap := &supervisor.HealthUpdate{Snapshot: true, Backends: []supervisor.BackendHealth{}}
	for i, b := range l.bs {
		snap.Backends = append(snap.Backends, supervisor.BackendHealth{Pool: l.members[i].Pool, Name: b.Name, Up: b.Healthy()})
	}
	// The certificates come before the health snapshot, which Follow
	// waits for: a process serves its first handshake with every one.
	ms = append(ms, l.certificatesLocked()...)
	ms = append(ms, supervisor.Message{Kind: supervisor.KindHealth, Health: snap})
	sent := map[*backend.Host]bool{}
	for i, b := range l.bs {
		if b.Ejected() && !sent[b.Host] {
			// Open, or half-open (its time over, so the new process sends
			// a probe and reports how it went): either way the control
			// counts it against max_ejected_percent until a close.
			sent[b.Host] = true
			until := b.EjectedUntil()
			if until.IsZero() {
				until = time.Now()
			}
			s := BreakerOf(b.Host, until)
			s.Pool = l.members[i].Pool
			ms = append(ms, supervisor.Message{Kind: supervisor.KindBreaker, Breaker: s})
		}
		if b.Draining() || b.Disabled() {
			ms = append(ms, supervisor.Message{Kind: supervisor.KindOperator, Operator: operatorOf(l.members[i].Pool, b)})
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
		case supervisor.KindChallenge:
			l.asked(i, lk, m.Challenge)
		case supervisor.KindOnDemand:
			l.demanded(i, lk, m.OnDemand)
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
// or breakers of different addresses, at the same moment; the control
// decides. It applies the changes one at a time, in the order they
// arrive, on its own hosts; refuses an opening that would hold out more
// than the reporting pool's max_ejected_percent of its members (another
// process ejected one meanwhile); logs each change of state once; and
// sends its verdict to every process, the sender included. Every process
// applies the same verdicts in the same order, so all end where the
// control is. The breaker is the address's: the verdict holds it out of
// every pool that has it.
func (l *Control) breakerChanged(from int, s *supervisor.BreakerState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[s.Name]
	if h == nil {
		// Not an address the control knows: pass it on as it came.
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: s})
		return
	}
	pool, b := l.judgedLocked(s.Pool, h)
	verdict := *s
	verdict.Pool = pool.Name
	switch {
	case s.Until == 0:
		if h.Ejected() {
			l.log.Info("circuit breaker closed", "backend", h.Name, "pool", pool.Name, "reason", s.Reason, "process", from)
		}
	case !h.EjectedUntil().IsZero():
		// Open already: another process saw it first. The later end stands.
	case h.Ejected():
		l.ejections[h.Name]++
		l.log.Warn("circuit breaker reopened", "backend", h.Name, "pool", pool.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	case backend.EjectionExceeds(l.poolBackendsLocked(pool.Name), b, pool.MaxEjectedPercent):
		l.log.Warn("circuit breaker not opened: too many backends ejected already", "backend", h.Name, "pool", pool.Name,
			"reason", s.Reason, "process", from, "max_ejected_percent", pool.MaxEjectedPercent)
		verdict = supervisor.BreakerState{Name: s.Name, Pool: pool.Name, Reason: "too many backends ejected already"}
	default:
		l.ejections[h.Name]++
		l.log.Warn("circuit breaker opened", "backend", h.Name, "pool", pool.Name, "reason", s.Reason, "process", from,
			"open_for", time.Until(time.Unix(0, s.Until)).Round(time.Millisecond).String())
	}
	if verdict.Until != 0 && h.EjectedUntil().After(time.Unix(0, verdict.Until)) {
		v := BreakerOf(h, h.EjectedUntil())
		v.Pool = verdict.Pool
		verdict = *v
	}
	ApplyBreaker(h, &verdict)
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindBreaker, Breaker: &verdict})
}

// judgedLocked is the pool whose members bound an opening of h's breaker
// and h's membership there: the reporting pool when it holds h, else the
// first pool that does. l.mu is held; h is a member somewhere.
func (l *Control) judgedLocked(reported string, h *backend.Host) (PoolRules, *backend.Backend) {
	var first int = -1
	for i, b := range l.bs {
		if b.Host != h {
			continue
		}
		if l.members[i].Pool == reported {
			first = i
			break
		}
		if first < 0 {
			first = i
		}
	}
	return l.rulesLocked(l.members[first].Pool), l.bs[first]
}

// backendLocked returns the member named name in pool, or nil; l.mu is
// held.
func (l *Control) backendLocked(pool, name string) *backend.Backend {
	for i, m := range l.members {
		if m.Pool == pool && m.URL == name {
			return l.bs[i]
		}
	}
	return nil
}

// poolBackendsLocked returns the members of pool; l.mu is held.
func (l *Control) poolBackendsLocked(pool string) []*backend.Backend {
	var bs []*backend.Backend
	for i, m := range l.members {
		if m.Pool == pool {
			bs = append(bs, l.bs[i])
		}
	}
	return bs
}
