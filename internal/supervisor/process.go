package supervisor

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"relay/internal/stats"
)

const (
	// envProcess carries a serving process's index; the supervisor sets it.
	envProcess = "RELAY_PROCESS"
	// envListeners lists the listening sockets a process inherits.
	envListeners = "RELAY_LISTENERS"
	// envShared says the process inherits sharedFD.
	envShared     = "RELAY_SHARED"
	listenerPlain = "plain"
	listenerTLS   = "tls"
	// A serving process inherits its cleartext listening socket, its
	// readiness pipe, its channel and its TLS listening socket as these
	// descriptors (ExtraFiles start at 3); envListeners says which of the
	// two sockets it has (a missing one's descriptor is left closed).
	// Then the memory the processes share (Options.Shared).
	listenFD  = 3
	readyFD   = 4
	channelFD = 5
	tlsFD     = 6
	sharedFD  = 7
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
	// Shared is the memory every serving process maps (Options.Shared);
	// nil when there is none.
	Shared *os.File

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
	p, err := Attached(index, ln, conn)
	if err != nil {
		closeListeners(ln, tln)
		return nil, err
	}
	p.TLSListener, p.ready = tln, os.NewFile(readyFD, "ready")
	if _, ok := os.LookupEnv(envShared); ok {
		p.Shared = os.NewFile(sharedFD, "shared memory")
	}
	return p, nil
}

// Attached returns serving process index over conn, its end of the
// channel, once it has read the configuration, the first message on every
// channel. ln is its listening socket. With one process the control
// attaches the serving side in its own process this way.
func Attached(index int, ln net.Listener, conn net.Conn) (*Process, error) {
	p := &Process{Index: index, Listener: ln, ch: NewChannel(conn)}
	m, err := p.ch.Recv()
	if err == nil && m.Kind != KindConfig {
		err = fmt.Errorf("the first message is %q, not the configuration", m.Kind)
	}
	if err != nil {
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

// Send sends m to the control.
func (p *Process) Send(m Message) error { return p.ch.Send(m) }

// Recv reads the next message from the control; one goroutine reads.
func (p *Process) Recv() (Message, error) { return p.ch.Recv() }

// Close closes the process's end of the channel, as exiting does.
func (p *Process) Close() error { return p.ch.Close() }

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
				c := p.Counters(read)
				if v := activity(c.Counters); v != last {
					last = v
					p.ch.Send(c)
				}
			case <-done:
				p.ch.Send(p.Counters(read))
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// Counters reads the process's counters with read into a message,
// numbered: collect answers and reports are read and sent by different
// goroutines, so a reading may be sent after a later one, and the number
// lets the control keep the later.
func (p *Process) Counters(read func() *stats.Process) Message {
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
