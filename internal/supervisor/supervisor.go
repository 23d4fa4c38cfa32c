package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"relay/internal/config"
	"relay/internal/version"
)

// restartDelay spaces restarts of a serving process that died, so one that
// fails at once does not spin.
const restartDelay = time.Second

// ProcessCount resolves the processes setting: 0 means one per core.
func ProcessCount(cfg *config.Config) int { return cfg.ServingProcesses() }

// ThreadsFor resolves the workers setting for a serving process: the
// configured count, or with several processes the cores shared among them.
// 0 leaves the Go runtime's default (every core) alone.
func ThreadsFor(cfg *config.Config) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	if cfg.CPUAffinity && ProcessCount(cfg) > 1 {
		return 1 // each process is bound to one core
	}
	if n := ProcessCount(cfg); n > 1 {
		return max(1, runtime.NumCPU()/n)
	}
	return 0
}

// Options is what Run needs from the command.
type Options struct {
	// Config is the configuration the supervisor loaded; Source is where
	// it came from, handed to every serving process.
	Config *config.Config
	Source ConfigSource
	// Args are relay's command-line arguments, given to every process.
	Args []string
	// Log is the supervisor's logger. Out is where the processes' log
	// lines go, in whole lines (Log writes there too, through the same
	// lock); ErrOut gets their standard error. Rotate reopens the log
	// file on SIGUSR1; Reload loads the configuration again on SIGHUP.
	Log    *slog.Logger
	Out    io.Writer
	ErrOut io.Writer
	Rotate func()
	Reload func()
	// Shared, when set, is memory every serving process inherits and
	// maps: the buckets of rate limits, so they hold for relay as a
	// whole (ratelimit.CreateShared). It outlives restarted processes.
	Shared *os.File
	// Control is relay's control plane (package control), which the
	// caller made; Run attaches every process to it.
	Control Control
	// Admin is the admin listener's address, for the start line.
	Admin string
	// Demo, when set, starts the demo backends before the processes.
	Demo func() (stop func(), err error)
	// Started, when set, runs once every process serves; Stopping as
	// relay begins to stop, before the processes drain.
	Started, Stopping func()
}

// Control is what the supervisor needs of relay's control plane: a
// channel to each serving process it starts, ended when the process
// exits, and relay's own addresses once it has bound them, which no
// backend may be. Package control implements it; the supervisor does not
// import it, so process mechanics and the control plane stay apart.
type Control interface {
	// Attach opens the channel of process i and returns the end the
	// process inherits.
	Attach(i int) (*os.File, error)
	// Detach ends the channel of process i, which exited, once what it
	// sent before it ended has been taken in.
	Detach(i int)
	// SetListeners tells the control where relay listens.
	SetListeners(config.Listeners)
}

// supervisor starts the serving processes, restarts one that dies, copies
// their output, and stops them all on SIGINT or SIGTERM.
type supervisor struct {
	opts       Options
	cfg        *config.Config
	log        *slog.Logger
	exe        string
	sockets    []*os.File // per process; nil without a cleartext listener
	tlsSockets []*os.File // per process; nil without TLS
	cpus       []int      // with cpu_affinity, the CPUs processes are bound to
	links      Control
	procs      []*exec.Cmd // nil while not running
	exited     chan exited
	copiers    sync.WaitGroup // copyLines of every process started
}

type exited struct {
	index int
	cmd   *exec.Cmd
	err   error
}

// Run runs relay as a supervisor of ProcessCount serving processes until
// SIGINT or SIGTERM.
func Run(opts Options) error {
	runtime.GOMAXPROCS(1) // it copies log lines and waits, nothing more
	cfg, log := opts.Config, opts.Log
	n := ProcessCount(cfg)
	if err := CheckPlatform(cfg); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find relay's own executable to start its processes: %w", err)
	}
	var cpus []int // with cpu_affinity, process i runs on cpus[i%len(cpus)]
	if cfg.CPUAffinity {
		if cpus, err = AllowedCPUs(); err != nil {
			return fmt.Errorf("cpu_affinity: %w", err)
		}
		if n < len(cpus) {
			log.Warn("cpu_affinity binds each process to one core: relay uses only as many cores as processes",
				"processes", n, "cores", len(cpus))
		}
		if !KernelAtLeast(6, 2) {
			log.Warn("cpu_affinity: this kernel ignores SO_INCOMING_CPU for SO_REUSEPORT sockets before Linux 6.2; processes are bound, connections spread by hash")
		}
	}
	// One socket per process on each address: cleartext, TLS, or both.
	var sockets, tlsSockets []*os.File
	var addrs []any
	var bound config.Listeners
	if cfg.Listen != "" {
		if sockets, bound.Listen, err = reusePortSockets(cfg.Listen, n, cpus); err != nil {
			return &ListenError{Key: "listen", Addr: cfg.Listen, Err: err}
		}
		addrs = append(addrs, "listen", bound.Listen)
	}
	defer func() { closeFiles(sockets) }()
	if cfg.TLSListen != "" {
		if tlsSockets, bound.TLSListen, err = reusePortSockets(cfg.TLSListen, n, cpus); err != nil {
			return &ListenError{Key: "tls_listen", Addr: cfg.TLSListen, Err: err}
		}
		addrs = append(addrs, "tls_listen", bound.TLSListen)
	}
	defer func() { closeFiles(tlsSockets) }()
	// No backend may be relay itself: the control now knows the ports
	// relay listens on, also where the configuration said 0.
	opts.Control.SetListeners(bound)
	if opts.Demo != nil {
		stop, err := opts.Demo()
		if err != nil {
			return err
		}
		defer stop()
	}

	// Signals first, so none is missed while the processes start.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	s := &supervisor{
		opts: opts, cfg: cfg, log: log, exe: exe, sockets: sockets, tlsSockets: tlsSockets, cpus: cpus, links: opts.Control,
		procs:  make([]*exec.Cmd, n),
		exited: make(chan exited, n),
	}
	if err := s.startAll(sigs); err != nil {
		closeFiles(sockets)
		closeFiles(tlsSockets)
		s.stopAll()
		if errors.Is(err, errInterrupted) {
			log.Info("stopped before every process served")
			return nil
		}
		return err
	}
	log.Info("relay started", append(addrs, "version", version.Get().Version, "algorithm", cfg.Algorithm,
		"backends", cfg.BackendCount(), "pools", len(cfg.AllPools()), "routes", len(cfg.Routes), cfg.Discovery.LogAttr(), "processes", n, "workers", ThreadsFor(cfg),
		"cpu_affinity", cpus != nil, "admin", opts.Admin)...)
	if opts.Started != nil {
		opts.Started()
	}

	restart := make(chan int, n)
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1:
				opts.Rotate()
				continue
			case syscall.SIGHUP:
				opts.Reload()
				continue
			}
			log.Info("shutting down", "signal", sig.String(), "window", cfg.ShutdownTimeout.String(), "processes", s.running())
			if opts.Stopping != nil {
				opts.Stopping()
			}
			// Closing the supervisor's copies first lets the sockets close
			// as soon as each process stops accepting, so new connections
			// are refused instead of queueing for nobody.
			closeFiles(sockets)
			closeFiles(tlsSockets)
			s.stopAll()
			log.Info("stopped")
			return nil
		case e := <-s.exited:
			if s.procs[e.index] != e.cmd {
				continue
			}
			s.procs[e.index] = nil
			s.links.Detach(e.index)
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
	// A serving process reads its configuration and the health snapshot
	// before it serves.
	wait := s.cfg.HealthCheck.Timeout + 10*time.Second
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for i := 0; i < len(readies); {
		select {
		case err := <-readies[i]:
			if err != nil {
				return fmt.Errorf("process %d did not start: %w", i, err)
			}
			i++
		case sig := <-sigs:
			if sig != syscall.SIGHUP && sig != syscall.SIGUSR1 { // nothing to reload or rotate yet
				return errInterrupted
			}
		case <-timeout.C:
			return fmt.Errorf("process %d did not start within %v", i, wait)
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
	channel, err := s.links.Attach(i)
	if err != nil {
		closeFiles(pipes[:])
		return nil, fmt.Errorf("process %d: %w", i, err)
	}
	cmd := exec.Command(s.exe, s.opts.Args...)
	cmd.Env = append(os.Environ(), envProcess+"="+strconv.Itoa(i))
	cmd.Stdout, cmd.Stderr = pipes[1], pipes[3]
	// Descriptors 3 to 7: the cleartext socket, the readiness pipe, the
	// channel, the TLS socket, the shared memory. A listener relay does not have is left
	// closed, and the environment says which ones there are.
	var plain, tls *os.File
	var have []string
	if s.sockets != nil {
		plain = s.sockets[i]
		have = append(have, listenerPlain)
	}
	if s.tlsSockets != nil {
		tls = s.tlsSockets[i]
		have = append(have, listenerTLS)
	}
	cmd.Env = append(cmd.Env, envListeners+"="+strings.Join(have, ","))
	cmd.ExtraFiles = []*os.File{plain, pipes[5], channel, tls}
	if s.opts.Shared != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.opts.Shared)
		cmd.Env = append(cmd.Env, envShared+"=1")
	}
	// If the supervisor dies, its processes drain and stop too.
	cmd.SysProcAttr = dieWithParent()
	if s.cpus != nil {
		cpu := s.cpus[i%len(s.cpus)]
		var bindErr error
		if bindErr, err = OnCPU(cpu, cmd.Start); bindErr != nil && err == nil {
			s.log.Warn("process runs unbound: cpu_affinity could not bind it", "process", i, "cpu", cpu, "err", bindErr)
		}
	} else {
		err = cmd.Start()
	}
	closeFiles([]*os.File{pipes[1], pipes[3], pipes[5], channel}) // the child holds its own copies
	if err != nil {
		closeFiles([]*os.File{pipes[0], pipes[2], pipes[4]})
		s.links.Detach(i)
		return nil, fmt.Errorf("process %d: %w", i, err)
	}
	s.procs[i] = cmd
	s.copiers.Go(func() { copyLines(s.opts.Out, pipes[0]) })
	s.copiers.Go(func() { copyLines(s.opts.ErrOut, pipes[2]) })
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
				s.links.Detach(e.index)
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

func closeFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
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

// LockedWriter serializes writes from the process output copiers and the
// supervisor's own logger, which share one destination.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}
