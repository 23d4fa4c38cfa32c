package main

// Several serving processes, as nginx runs worker_processes.
//
// With processes: N (N > 1) the relay the user started becomes a supervisor
// that serves nothing itself. It binds N listening sockets to the listen
// address with SO_REUSEPORT, so the kernel spreads new connections over them
// by a hash of the client's address and port, and starts N copies of its own
// executable with the same arguments. Each copy inherits one socket as file
// descriptor 3, a pipe to say "serving" on as descriptor 4, the supervisor's
// health feed as descriptor 5 (healthfeed.go: the supervisor runs the active
// checks once for all), and pipes for its standard output and error, and
// serves on its own: its own Go runtime, connection pools and balancer state.
//
// Why processes and not only threads: relay's engine spends most of its CPU
// in system calls, and one Go process with one scheduler thread does that
// most cheaply; with two threads the runtime spends CPU waking and spinning
// the second one. One single-threaded process per core keeps the cheap
// shape and still uses every core (BENCHMARKS.md has the figures).
//
// The supervisor keeps the sockets open, so connections that arrive while a
// serving process restarts wait in that socket's queue instead of failing.
// It owns the log file too: serving processes write JSON lines to their
// standard output, and the supervisor copies them to the log in whole
// lines, so lines never interleave and size rotation has one writer.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"relay/internal/config"
)

const (
	// envProcess carries a serving process's index; the supervisor sets it.
	envProcess = "RELAY_PROCESS"
	// A serving process inherits its listening socket and its readiness
	// pipe as these descriptors (ExtraFiles start at 3).
	listenFD = 3
	readyFD  = 4
	// soReusePort is SO_REUSEPORT on Linux; the syscall package lacks it.
	soReusePort = 0xf
	// restartDelay spaces restarts of a serving process that died, so one
	// that fails at once does not spin.
	restartDelay = time.Second
)

// processCount resolves the processes setting: 0 means one per core.
func processCount(cfg *config.Config) int {
	if cfg.Processes == 0 {
		return runtime.NumCPU()
	}
	return cfg.Processes
}

// threadsFor resolves the workers setting for a serving process: the
// configured count, or with several processes the cores shared among them.
// 0 leaves the Go runtime's default (every core) alone.
func threadsFor(cfg *config.Config) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	if cfg.CPUAffinity && processCount(cfg) > 1 {
		return 1 // each process is bound to one core
	}
	if n := processCount(cfg); n > 1 {
		return max(1, runtime.NumCPU()/n)
	}
	return 0
}

// servingProcess is what a process started by the supervisor inherits.
type servingProcess struct {
	index  int
	ln     net.Listener
	ready  *os.File
	health *os.File // the supervisor's health feed
}

// inherited returns the socket and readiness pipe the supervisor handed
// this process, or nil when relay was started directly.
func inherited() (*servingProcess, error) {
	v, ok := os.LookupEnv(envProcess)
	if !ok {
		return nil, nil
	}
	const hint = "it is set by relay for the processes it starts; unset it to start relay directly"
	index, err := strconv.Atoi(v)
	if err != nil || index < 0 {
		return nil, fmt.Errorf("%s=%q is not a process number; %s", envProcess, v, hint)
	}
	f := os.NewFile(listenFD, "listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s is set but descriptor %d is not a listening socket (%v); %s", envProcess, listenFD, err, hint)
	}
	return &servingProcess{index: index, ln: ln, ready: os.NewFile(readyFD, "ready"), health: os.NewFile(healthFD, "health")}, nil
}

// serving tells the supervisor this process accepts connections now.
func (sp *servingProcess) serving() {
	sp.ready.Write([]byte{'\n'})
	sp.ready.Close()
}

// reusePortSockets binds n listening sockets to addr that share it through
// SO_REUSEPORT and returns them as files for children to inherit, with the
// address they are bound to. A plain bind comes first, so an address that is
// already in use, by anyone, is refused rather than silently shared; it also
// resolves port 0. With cpus, socket i asks for the connections arriving on
// CPU cpus[i] (SO_INCOMING_CPU).
func reusePortSockets(addr string, n int, cpus []int) ([]*os.File, string, error) {
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	addr = probe.Addr().String()
	probe.Close()

	files := make([]*os.File, 0, n)
	for i := range n {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
				if serr == nil && cpus != nil {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soIncomingCPU, cpus[i%len(cpus)])
					if serr != nil {
						serr = fmt.Errorf("cpu_affinity: SO_INCOMING_CPU: %w", serr)
					}
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			closeFiles(files)
			return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
		}
		f, err := ln.(*net.TCPListener).File() // a duplicate descriptor
		ln.Close()
		if err != nil {
			closeFiles(files)
			return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
		}
		files = append(files, f)
	}
	return files, addr, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// supervisor starts the serving processes, restarts one that dies, copies
// their output, and stops them all on SIGINT or SIGTERM.
type supervisor struct {
	cfg     *config.Config
	log     *slog.Logger
	out     io.Writer // whole lines only; shared with log
	errOut  io.Writer
	exe     string
	args    []string
	sockets []*os.File
	cpus    []int // with cpu_affinity, the CPUs processes are bound to
	feed    *healthFeed
	procs   []*exec.Cmd // nil while not running
	exited  chan exited
	copiers sync.WaitGroup // copyLines of every process started
}

type exited struct {
	index int
	cmd   *exec.Cmd
	err   error
}

// supervise runs relay as a supervisor of processCount(cfg) serving
// processes until SIGINT or SIGTERM.
func supervise(cfg *config.Config, args []string, demo bool, stdout, stderr io.Writer) error {
	runtime.GOMAXPROCS(1) // it copies log lines and waits, nothing more
	n := processCount(cfg)
	logOut, out, log, err := openLog(cfg, cfg.LogFile, stdout, true)
	if err != nil {
		return err
	}
	defer logOut.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find relay's own executable to start its processes: %w", err)
	}
	var cpus []int // with cpu_affinity, process i runs on cpus[i%len(cpus)]
	if cfg.CPUAffinity {
		if cpus, err = allowedCPUs(); err != nil {
			return fmt.Errorf("cpu_affinity: %w", err)
		}
		if n < len(cpus) {
			log.Warn("cpu_affinity binds each process to one core: relay uses only as many cores as processes",
				"processes", n, "cores", len(cpus))
		}
		if !kernelAtLeast(6, 2) {
			log.Warn("cpu_affinity: this kernel ignores SO_INCOMING_CPU for SO_REUSEPORT sockets before Linux 6.2; processes are bound, connections spread by hash")
		}
	}
	sockets, addr, err := reusePortSockets(cfg.Listen, n, cpus)
	if err != nil {
		return err
	}
	defer closeFiles(sockets)
	if demo {
		stop, err := startDemoBackends(log)
		if err != nil {
			return err
		}
		defer stop()
	}

	// Signals first, so none is missed while the processes start.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// The supervisor checks the backends once for every process.
	bs, err := buildBackends(cfg)
	if err != nil {
		return err
	}
	feed := newHealthFeed(bs, log)
	checker, err := newChecker(cfg, bs, feed.changed, log)
	if err != nil {
		return err
	}
	stopChecks := checkFirst(cfg, checker)
	defer stopChecks()

	s := &supervisor{
		cfg: cfg, log: log, out: out, errOut: &lockedWriter{w: stderr},
		exe: exe, args: args, sockets: sockets, cpus: cpus, feed: feed,
		procs:  make([]*exec.Cmd, n),
		exited: make(chan exited, n),
	}
	if err := s.startAll(sigs); err != nil {
		closeFiles(sockets)
		s.stopAll()
		if errors.Is(err, errInterrupted) {
			log.Info("stopped before every process served")
			return nil
		}
		return err
	}
	log.Info("relay started", "listen", addr, "algorithm", cfg.Algorithm,
		"backends", len(cfg.Backends), "processes", n, "workers", threadsFor(cfg), "cpu_affinity", cpus != nil)

	restart := make(chan int, n)
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				rotateLog(log, logOut)
				continue
			}
			log.Info("shutting down", "signal", sig.String(), "window", cfg.ShutdownTimeout.String(), "processes", s.running())
			// Closing the supervisor's copies first lets the sockets close
			// as soon as each process stops accepting, so new connections
			// are refused instead of queueing for nobody.
			closeFiles(sockets)
			s.stopAll()
			log.Info("stopped")
			return nil
		case e := <-s.exited:
			if s.procs[e.index] != e.cmd {
				continue
			}
			s.procs[e.index] = nil
			s.feed.detach(e.index)
			log.Error("process exited; restarting it", "process", e.index, "pid", e.cmd.Process.Pid,
				"err", exitReason(e.err), "after", restartDelay.String())
			time.AfterFunc(restartDelay, func() { restart <- e.index })
		case i := <-restart:
			if _, err := s.start(i); err != nil {
				log.Error("cannot restart process", "process", i, "err", err)
				time.AfterFunc(restartDelay, func() { restart <- i })
			}
		}
	}
}

// errInterrupted ends startAll when SIGINT or SIGTERM arrives first.
var errInterrupted = errors.New("interrupted")

// startAll starts every serving process and waits until each says it is
// serving or fails, or until SIGINT or SIGTERM arrives.
func (s *supervisor) startAll(sigs <-chan os.Signal) error {
	readies := make([]<-chan error, len(s.procs))
	for i := range s.procs {
		ready, err := s.start(i)
		if err != nil {
			return err
		}
		readies[i] = ready
	}
	// A serving process reads the health snapshot before it serves.
	timeout := time.NewTimer(s.cfg.HealthCheck.Timeout + 10*time.Second)
	defer timeout.Stop()
	for i := 0; i < len(readies); {
		select {
		case err := <-readies[i]:
			if err != nil {
				return fmt.Errorf("process %d did not start: %w", i, err)
			}
			i++
		case sig := <-sigs:
			if sig != syscall.SIGHUP { // nothing to rotate yet
				return errInterrupted
			}
		case <-timeout.C:
			return fmt.Errorf("process %d did not start within %v", i, s.cfg.HealthCheck.Timeout+10*time.Second)
		}
	}
	return nil
}

// start launches serving process i. The returned channel yields nil once
// the process serves, or why it never will.
func (s *supervisor) start(i int) (<-chan error, error) {
	var pipes [6]*os.File // stdout r/w, stderr r/w, ready r/w
	for k := 0; k < len(pipes); k += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(pipes[:k])
			return nil, fmt.Errorf("process %d: %w", i, err)
		}
		pipes[k], pipes[k+1] = r, w
	}
	health, err := s.feed.attach(i)
	if err != nil {
		closeFiles(pipes[:])
		return nil, fmt.Errorf("process %d: %w", i, err)
	}
	defer health.Close() // the child holds its own copy
	cmd := exec.Command(s.exe, s.args...)
	cmd.Env = append(os.Environ(), envProcess+"="+strconv.Itoa(i))
	cmd.Stdout, cmd.Stderr = pipes[1], pipes[3]
	cmd.ExtraFiles = []*os.File{s.sockets[i], pipes[5], health} // descriptors 3, 4 and 5
	// If the supervisor dies, its processes drain and stop too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if s.cpus != nil {
		cpu := s.cpus[i%len(s.cpus)]
		var bindErr error
		if bindErr, err = onCPU(cpu, cmd.Start); bindErr != nil && err == nil {
			s.log.Warn("process runs unbound: cpu_affinity could not bind it", "process", i, "cpu", cpu, "err", bindErr)
		}
	} else {
		err = cmd.Start()
	}
	closeFiles([]*os.File{pipes[1], pipes[3], pipes[5]}) // the child holds its own copies
	if err != nil {
		closeFiles([]*os.File{pipes[0], pipes[2], pipes[4]})
		s.feed.detach(i)
		return nil, fmt.Errorf("process %d: %w", i, err)
	}
	s.procs[i] = cmd
	s.copiers.Go(func() { copyLines(s.out, pipes[0]) })
	s.copiers.Go(func() { copyLines(s.errOut, pipes[2]) })
	ready := make(chan error, 1)
	go func() {
		defer pipes[4].Close()
		var b [1]byte
		if n, _ := pipes[4].Read(b[:]); n == 1 {
			ready <- nil
			return
		}
		ready <- errors.New("it exited before serving; its output above says why")
	}()
	go func() { s.exited <- exited{i, cmd, cmd.Wait()} }()
	return ready, nil
}

// running counts the serving processes alive now.
func (s *supervisor) running() int {
	n := 0
	for _, c := range s.procs {
		if c != nil {
			n++
		}
	}
	return n
}

// stopAll asks every serving process to drain and stop (SIGTERM) and waits
// for them, and for their last output to be copied; any still running a
// little after the shutdown window is killed.
func (s *supervisor) stopAll() {
	for _, c := range s.procs {
		if c != nil {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	kill := time.NewTimer(s.cfg.ShutdownTimeout + 5*time.Second)
	defer kill.Stop()
	for s.running() > 0 {
		select {
		case e := <-s.exited:
			if s.procs[e.index] == e.cmd {
				s.procs[e.index] = nil
			}
		case <-kill.C:
			for i, c := range s.procs {
				if c != nil {
					s.log.Warn("process did not stop in time; killing it", "process", i, "pid", c.Process.Pid)
					c.Process.Kill()
				}
			}
		}
	}
	s.copiers.Wait() // the pipes end when the processes do
}

// exitReason says how a serving process ended, for the log.
func exitReason(err error) string {
	if err == nil {
		return "exited with status 0"
	}
	return err.Error()
}

// copyLines copies r to w until r ends, in writes of whole lines, so the
// output of several processes interleaves only between lines. A line longer
// than the buffer, or a last line without its newline, is written in pieces
// that each end with a newline, so it never runs into another's line.
func copyLines(w io.Writer, r *os.File) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf[n:])
		n += k
		end := bytes.LastIndexByte(buf[:n], '\n') + 1
		if err != nil || (end == 0 && n == len(buf)) {
			end = n // all of it: the stream ended, or one line fills the buffer
		}
		if end > 0 {
			out := buf[:end]
			if out[end-1] != '\n' {
				out = append(out[:end:end], '\n') // a copy, buf keeps the rest
			}
			w.Write(out)
			n = copy(buf, buf[end:n])
		}
		if err != nil {
			return
		}
	}
}

// lockedWriter serializes writes from the copiers and the logger.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
