package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
)

const (
	// envProcess carries a serving process's index; the supervisor sets it.
	envProcess = "RELAY_PROCESS"
	// envListeners lists the listening sockets a process inherits.
	envListeners  = "RELAY_LISTENERS"
	listenerPlain = "plain"
	listenerTLS   = "tls"
	// A serving process inherits its cleartext listening socket, its
	// readiness pipe, its channel and its TLS listening socket as these
	// descriptors (ExtraFiles start at 3); envListeners says which of the
	// two sockets it has (a missing one's descriptor is left closed).
	listenFD  = 3
	readyFD   = 4
	channelFD = 5
	tlsFD     = 6
)

// Process is a serving process's side of the supervisor: what it inherited
// and its channel.
type Process struct {
	// Index numbers the process among its supervisor's, from 0.
	Index int
	// Listener is the process's own listening socket; nil when relay
	// serves TLS only.
	Listener net.Listener
	// TLSListener is the process's TLS listening socket, nil without TLS.
	TLSListener net.Listener
	// Config is the configuration to run, the first message received.
	Config ConfigSource

	ready *os.File
	ch    *Channel

	counting sync.Mutex // numbers readings of the counters in read order
	readings uint64     // the number of the last reading
}

// Inherited returns what the supervisor handed this process, or nil when
// relay was started directly. It reads the configuration message, so a
// process runs what its supervisor loaded.
func Inherited() (*Process, error) {
	v, ok := os.LookupEnv(envProcess)
	if !ok {
		return nil, nil
	}
	const hint = "it is set by relay for the processes it starts; unset it to start relay directly"
	index, err := strconv.Atoi(v)
	if err != nil || index < 0 {
		return nil, fmt.Errorf("%s=%q is not a process number; %s", envProcess, v, hint)
	}
	var ln, tln net.Listener
	have, ok := os.LookupEnv(envListeners)
	if !ok {
		have = listenerPlain
	}
	for _, name := range strings.Split(have, ",") {
		fd, dst := uintptr(listenFD), &ln
		switch name {
		case listenerPlain:
		case listenerTLS:
			fd, dst = tlsFD, &tln
		default:
			continue
		}
		f := os.NewFile(fd, name+" listener")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			closeListeners(ln, tln)
			return nil, fmt.Errorf("%s is set but descriptor %d is not a listening socket (%v); %s", envProcess, fd, err, hint)
		}
		*dst = l
	}
	if ln == nil && tln == nil {
		return nil, fmt.Errorf("%s is set but %s names no listening socket; %s", envProcess, envListeners, hint)
	}
	f := os.NewFile(channelFD, "channel")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		closeListeners(ln, tln)
		return nil, fmt.Errorf("%s is set but descriptor %d is not the supervisor's channel (%v); %s", envProcess, channelFD, err, hint)
	}
	p := &Process{Index: index, Listener: ln, TLSListener: tln, ready: os.NewFile(readyFD, "ready"), ch: NewChannel(conn)}
	m, err := p.ch.Recv()
	if err == nil && m.Kind != KindConfig {
		err = fmt.Errorf("the first message is %q, not the configuration", m.Kind)
	}
	if err != nil {
		closeListeners(ln, tln)
		p.ch.Close()
		return nil, fmt.Errorf("reading the configuration from the supervisor: %w", err)
	}
	p.Config = *m.Config
	return p, nil
}

// Serving tells the supervisor this process accepts connections now.
func (p *Process) Serving() {
	if p.ready == nil {
		return // one process, nobody to tell
	}
	p.ready.Write([]byte{'\n'})
	p.ready.Close()
}

// Updates are what Follow does with messages other than health, breakers
// and operator state, which it applies to the backends itself.
type Updates struct {
	// Membership receives a new set of backends and returns the process's
	// backends after applying it; nil ignores membership messages.
	Membership func([]Member) []*backend.Backend
	// Config receives a configuration generation after the first (a
	// reload); nil ignores them.
	Config func(ConfigSource)
	// Stats reads the process's counters, for the supervisor's collects;
	// nil answers none.
	Stats func() *stats.Process
	// Reopen reopens the shared log file after a rotation; nil ignores it.
	Reopen func()
	// Tickets receives new TLS session-ticket keys, newest first; nil
	// ignores them.
	Tickets func([][]byte)
	// Ended is called once when the channel ends or breaks; the process
	// should then stop, so that the supervisor starts it afresh.
	Ended func(error)
}

// Follow reads what the supervisor sends a new process, the membership
// and the health snapshot, applies it to bs, and returns once it is
// applied; then it applies what the supervisor sends in the background:
// health transitions, breaker verdicts and operator state to the backends
// of the same name (names it does not know are ignored), membership and
// configuration through u, and answers collects with u.Stats.
func (p *Process) Follow(bs []*backend.Backend, u Updates) error {
	byName := index(bs)
	for {
		m, err := p.ch.Recv()
		if err != nil {
			return fmt.Errorf("reading the health snapshot from the supervisor: %w", err)
		}
		if m.Kind == KindMembership {
			if u.Membership != nil {
				byName = index(u.Membership(m.Membership))
			}
			continue
		}
		if m.Kind != KindHealth || !m.Health.Snapshot {
			return fmt.Errorf("reading the health snapshot from the supervisor: expected the health snapshot, got a %q message", m.Kind)
		}
		applyHealth(byName, m.Health)
		break
	}
	generation := p.Config.Generation
	go func() {
		for {
			m, err := p.ch.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("the supervisor closed it")
				}
				if u.Ended != nil {
					u.Ended(err)
				}
				return
			}
			switch m.Kind {
			case KindHealth:
				applyHealth(byName, m.Health)
			case KindOperator:
				if b := byName[m.Operator.Name]; b != nil {
					applyOperator(b, m.Operator)
				}
			case KindBreaker:
				if b := byName[m.Breaker.Name]; b != nil {
					ApplyBreaker(b, m.Breaker)
				}
			case KindMembership:
				if u.Membership != nil {
					byName = index(u.Membership(m.Membership))
				}
			case KindReopen:
				if u.Reopen != nil {
					u.Reopen()
				}
			case KindTickets:
				if u.Tickets != nil {
					u.Tickets(m.Tickets)
				}
			case KindCollect:
				if u.Stats != nil {
					c := p.counters(u.Stats)
					c.Collect = m.Collect
					p.ch.Send(c)
				}
			case KindConfig:
				if m.Config.Generation > generation && u.Config != nil {
					generation = m.Config.Generation
					u.Config(*m.Config)
				}
			}
		}
	}()
	return nil
}

func index(bs []*backend.Backend) map[string]*backend.Backend {
	byName := make(map[string]*backend.Backend, len(bs))
	for _, b := range bs {
		byName[b.Name] = b
	}
	return byName
}

func applyHealth(byName map[string]*backend.Backend, h *HealthUpdate) {
	for _, s := range h.Backends {
		if b := byName[s.Name]; b != nil {
			b.SetHealthy(s.Up)
		}
	}
}

// ApplyBreaker makes b's breaker what another process reported: ejected
// until the time given, or closed.
func ApplyBreaker(b *backend.Backend, s *BreakerState) {
	if s.Until == 0 {
		b.Close()
		return
	}
	b.SetTrips(s.Trips)
	b.Eject(time.Unix(0, s.Until))
}

// BreakerOf is b's breaker as a message carries it; a zero until means
// closed.
func BreakerOf(b *backend.Backend, until time.Time) *BreakerState {
	s := &BreakerState{Name: b.Name, Trips: b.Trips()}
	if !until.IsZero() {
		s.Until = until.UnixNano()
	}
	return s
}

// ReportBreaker tells the supervisor that b's breaker opened until until,
// or closed when until is zero, and why. The supervisor decides, logs the
// change and sends its verdict to every process, this one included
// (links.breakerChanged). It is the forwarding core's breaker hook
// (core.PoolConfig.OnBreaker).
func (p *Process) ReportBreaker(b *backend.Backend, until time.Time, reason string) {
	s := BreakerOf(b, until)
	s.Reason = reason
	p.ch.Send(Message{Kind: KindBreaker, Breaker: s})
}

func applyOperator(b *backend.Backend, o *OperatorState) {
	b.SetDraining(o.Draining)
	b.SetDisabled(o.Disabled)
}

// operatorOf is b's operator state as a message carries it.
func operatorOf(b *backend.Backend) *OperatorState {
	return &OperatorState{Name: b.Name, Draining: b.Draining(), Disabled: b.Disabled()}
}

// ReportCounters sends the process's counters, as read returns them, to
// the supervisor every interval when they changed, and once more when stop
// is called, so the supervisor keeps what a process counted after it
// exits. Scrapes do not wait for it: they collect (Follow answers).
func (p *Process) ReportCounters(every time.Duration, read func() *stats.Process) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		var last uint64
		for {
			select {
			case <-t.C:
				c := p.counters(read)
				if v := activity(c.Counters); v != last {
					last = v
					p.ch.Send(c)
				}
			case <-done:
				p.ch.Send(p.counters(read))
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// counters reads the process's counters with read into a message,
// numbered: collect answers and reports are read and sent by different
// goroutines, so a reading may be sent after a later one, and the number
// lets the control keep the later.
func (p *Process) counters(read func() *stats.Process) Message {
	p.counting.Lock()
	defer p.counting.Unlock()
	p.readings++
	return Message{Kind: KindCounters, Counters: read(), Reading: p.readings}
}

// activity is a number that changes whenever the process served anything:
// connections accepted and requests sent or answered.
func activity(st *stats.Process) uint64 {
	n := st.ConnsAccepted
	for _, b := range st.Backends {
		n += b.Served + b.Requests.Total() + uint64(b.InFlight)<<32
	}
	for _, q := range st.Pools {
		n += q.Unanswered.Total() + uint64(q.Queued)
	}
	return n
}

func closeListeners(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}
