package main

// One set of health checks for all serving processes.
//
// With several processes the supervisor runs the active health checks and
// streams their results to every process through a pipe (descriptor 5), so
// each backend is probed once per interval however many processes serve, and
// every process takes a backend out of rotation at the same moment. A
// process starts from a snapshot of every backend's state, written first on
// its pipe, so one restarted later starts accurate too. Passive failure
// detection stays each process's own, as it reacts to that process's traffic.
//
// The feed is line-based text: "1 NAME" or "0 NAME" for a backend that is
// up or down, NAME being the backend's canonical URL, and an empty line after
// the snapshot. A process that falls too far behind, or whose feed ends, is
// stopped and started again, and so resynchronized.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/health"
)

// healthFD is the descriptor a serving process reads the feed from.
const healthFD = 5

// feedQueue bounds the updates queued for one process; one that lets more
// pile up is restarted rather than allowed to stall the checks.
const feedQueue = 4096

// newChecker builds the active health checker of bs from the configuration.
func newChecker(cfg *config.Config, bs []*backend.Backend, onChange func(*backend.Backend, bool), log *slog.Logger) (*health.Checker, error) {
	return health.New(health.Config{
		Type:     cfg.HealthCheck.Type,
		Path:     cfg.HealthCheck.Path,
		Interval: cfg.HealthCheck.Interval,
		Timeout:  cfg.HealthCheck.Timeout,
		Rise:     cfg.HealthCheck.Rise,
		Fall:     cfg.HealthCheck.Fall,

		ReuseConnection: cfg.HealthCheck.ReuseConnection,
	}, bs, onChange, health.WithLogger(log))
}

// checkFirst probes every backend once, so the state a process starts from
// is accurate, and then keeps checking them until stop is called.
func checkFirst(cfg *config.Config, c *health.Checker) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.HealthCheck.Timeout+time.Second)
	c.CheckAll(ctx)
	cancel()
	c.Run(context.Background())
	return c.Stop
}

// healthFeed is the supervisor's side: the backends it checks and the feed
// of every running process.
type healthFeed struct {
	bs  []*backend.Backend
	log *slog.Logger

	mu    sync.Mutex
	feeds map[int]*feed // by process index
}

// feed is one process's pipe and the updates queued for it.
type feed struct {
	queue chan []byte
	w     *os.File
}

// end stops the feed; closing the pipe also ends a write in progress, so
// the process sees the end of its feed even if it stopped reading.
func (f *feed) end() {
	close(f.queue)
	f.w.Close()
}

func newHealthFeed(bs []*backend.Backend, log *slog.Logger) *healthFeed {
	return &healthFeed{bs: bs, log: log, feeds: map[int]*feed{}}
}

// attach opens the feed of process i and returns the end the process
// inherits. Its first message is the snapshot of every backend's state.
func (h *healthFeed) attach(i int) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	f := &feed{queue: make(chan []byte, feedQueue), w: w}
	go func() {
		for msg := range f.queue {
			if _, err := w.Write(msg); err != nil {
				return // the process is gone, or the feed ended
			}
		}
	}()
	var snap []byte
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bs {
		snap = appendUpdate(snap, b, b.Healthy())
	}
	f.queue <- append(snap, '\n')
	h.dropLocked(i)
	h.feeds[i] = f
	return r, nil
}

// detach ends the feed of process i.
func (h *healthFeed) detach(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(i)
}

// dropLocked ends and forgets the feed of process i, if any; h.mu is held.
func (h *healthFeed) dropLocked(i int) {
	if f := h.feeds[i]; f != nil {
		f.end()
		delete(h.feeds, i)
	}
}

// changed sends a transition to every process. It never blocks: a process
// whose queue is full loses its feed, and with it its place, and restarts.
func (h *healthFeed) changed(b *backend.Backend, healthy bool) {
	msg := appendUpdate(nil, b, healthy)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, f := range h.feeds {
		select {
		case f.queue <- msg:
		default:
			h.log.Error("process fell behind on health updates; its feed is closed so it restarts", "process", i)
			h.dropLocked(i)
		}
	}
}

func appendUpdate(dst []byte, b *backend.Backend, healthy bool) []byte {
	if healthy {
		dst = append(dst, "1 "...)
	} else {
		dst = append(dst, "0 "...)
	}
	return append(append(dst, b.Name...), '\n')
}

// followHealth is a serving process's side. It reads the snapshot from r
// into bs, returns once it is read, and goes on applying updates in the
// background, calling changed after each that changes a backend. When the
// feed ends, ended is called. Names the process does not know (its
// configuration file was edited since the supervisor read it) are ignored.
func followHealth(r io.ReadCloser, bs []*backend.Backend, changed func(), ended func(error)) error {
	byName := make(map[string]*backend.Backend, len(bs))
	for _, b := range bs {
		byName[b.Name] = b
	}
	br := bufio.NewReader(r)
	// ReadBytes rather than ReadSlice: a URL may be longer than the buffer.
	apply := func(line []byte) (bool, error) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		state, name, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(state) != 1 || state[0] != '0' && state[0] != '1' {
			return false, fmt.Errorf("malformed health update %q", line)
		}
		b := byName[string(name)]
		return b != nil && b.SetHealthy(state[0] == '1'), nil
	}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			r.Close()
			return fmt.Errorf("reading the health snapshot from the supervisor: %w", err)
		}
		if len(line) == 1 {
			break // the end of the snapshot
		}
		if _, err := apply(line); err != nil {
			r.Close()
			return err
		}
	}
	go func() {
		defer r.Close()
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("the supervisor closed it")
				}
				ended(err)
				return
			}
			flipped, err := apply(line)
			if err != nil {
				ended(err)
				return
			}
			if flipped {
				changed()
			}
		}
	}()
	return nil
}
