package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"relay/internal/config"
)

// Backoff bounds the waits between attempts to reach etcd: the first
// retry comes after MinBackoff, each next one after twice as long, up to
// MaxBackoff.
var (
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 2 * time.Second
)

// Watcher keeps the backends under an etcd prefix: it lists the prefix,
// then watches it from the list's revision, and calls apply with the whole
// discovered set (sorted by key; the backends of every pool together, each
// with its Pool) whenever it changes. When etcd cannot be
// reached it keeps the last set, says so once, retries with backoff and
// lists again when etcd answers; it lists again too when the revision it
// watched from was compacted away.
type Watcher struct {
	e     *config.Etcd
	log   *slog.Logger
	apply func([]Backend) error
	self  config.SelfCheck // nil: no backend is refused as relay itself

	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the watching goroutine.
	cli     *clientv3.Client
	keys    map[string]Backend // the valid value of each key
	created map[string]int64   // the revision each of those keys was created at
	applied []Backend          // the set last handed to apply
	dups    map[string]bool    // keys whose pool and URL an earlier key has, as last logged
	refusal string             // why apply refused the last set, as logged; "" once one is applied
}

// Watch starts watching e's prefix; apply is called from one goroutine at
// a time, first when the first list succeeds. A set apply refuses is
// logged and offered again after a backoff. A value whose URL self says
// is relay itself is not a backend (parse); self may be nil.
func Watch(e *config.Etcd, log *slog.Logger, apply func([]Backend) error, self config.SelfCheck) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{e: e, log: log, apply: apply, self: self, cancel: cancel, done: make(chan struct{}), keys: map[string]Backend{}, created: map[string]int64{}}
	go w.run(ctx)
	return w
}

// Stop ends the watch and closes the client; the set last applied stays
// where apply put it.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

// testHookListed, when a test sets it, runs between a list and the watch
// that follows it: a test can change etcd in that gap.
var testHookListed func(rev int64)

// errLost is the watch ending because no endpoint can be reached.
var errLost = errors.New("no etcd endpoint can be reached")

// applyError is apply refusing a set: relay keeps the backends it has,
// and the watcher offers the set again.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	defer func() {
		if w.cli != nil {
			w.cli.Close()
		}
	}()
	wait := MinBackoff
	backoff := func() bool {
		ok := sleep(ctx, wait)
		wait = min(2*wait, MaxBackoff)
		return ok
	}
	var refused *applyError
	lost, listed := false, false
	for {
		rev, err := w.list(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case errors.As(err, &refused):
			w.refused(refused)
		case err != nil && !lost:
			lost = true
			if listed {
				w.log.Warn("discovery: etcd cannot be reached; relay keeps the last known backends and retries",
					"endpoints", w.e.Endpoints, "backends", len(w.keys), "err", err.Error())
			} else {
				w.log.Warn("discovery: etcd cannot be reached at start; relay serves the configured backends and retries",
					"endpoints", w.e.Endpoints, "err", err.Error())
			}
		}
		if err != nil {
			if !backoff() {
				return
			}
			continue
		}
		if lost {
			w.log.Info("discovery: etcd answers again; backends listed afresh", "endpoints", w.e.Endpoints, "backends", len(w.keys))
		} else if !listed {
			w.log.Info("discovery: watching etcd", "endpoints", w.e.Endpoints, "prefix", w.e.Prefix, "backends", len(w.keys))
		}
		lost, listed = false, true
		if testHookListed != nil {
			testHookListed(rev)
		}
		started := time.Now()
		err = w.watch(ctx, rev+1)
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &refused):
			w.refused(refused)
		case errors.Is(err, errLost):
			lost = true
			w.log.Warn("discovery: lost etcd; relay keeps the last known backends and retries",
				"endpoints", w.e.Endpoints, "backends", len(w.keys))
		default:
			w.log.Info("discovery: watch ended; listing again", "reason", err.Error())
		}
		// After a watch that lasted, the next list comes at once; after
		// one that ended straight away (a member that keeps ending
		// streams), it waits as after a failure.
		if time.Since(started) > MaxBackoff {
			wait = MinBackoff
		} else if !backoff() {
			return
		}
	}
}

// refused logs a refused set, once for each new reason.
func (w *Watcher) refused(err *applyError) {
	if err.Error() == w.refusal {
		return
	}
	w.refusal = err.Error()
	w.log.Error("discovery: the backends found in etcd could not be applied; relay keeps the ones it has and tries again",
		"err", err.Error())
}

// list reads every key under the prefix, applies the set and returns the
// revision it was read at.
func (w *Watcher) list(ctx context.Context) (int64, error) {
	if w.cli == nil {
		cli, err := NewClient(w.e)
		if err != nil {
			return 0, err
		}
		w.cli = cli
	}
	lctx, cancel := context.WithTimeout(ctx, w.e.DialTimeout)
	defer cancel()
	resp, err := w.cli.Get(lctx, w.e.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	old, created := w.keys, w.created
	w.keys, w.created = make(map[string]Backend, len(resp.Kvs)), make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		prev := old
		if created[key] != kv.CreateRevision {
			prev = nil // deleted and made again meanwhile: what it held is not its
		}
		if b, ok := w.parse(key, kv.Value, prev); ok {
			w.keys[key], w.created[key] = b, kv.CreateRevision
		}
	}
	if err := w.publish(); err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// watch follows the prefix from rev until ctx ends, the revision is
// compacted, or no endpoint can be reached (errLost).
func (w *Watcher) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	var lost sync.WaitGroup
	lost.Add(1)
	lostErr := make(chan struct{})
	go func() {
		defer lost.Done()
		if w.awaitFailure(wctx) {
			close(lostErr)
			cancel()
		}
	}()
	defer func() {
		cancel()
		lost.Wait()
	}()
	for resp := range w.cli.Watch(clientv3.WithRequireLeader(wctx), w.e.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("revision %d was compacted (now %d)", rev, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				prev := w.keys
				if w.created[key] != ev.Kv.CreateRevision {
					prev = nil
				}
				if b, ok := w.parse(key, ev.Kv.Value, prev); ok {
					w.keys[key], w.created[key] = b, ev.Kv.CreateRevision
				}
			case clientv3.EventTypeDelete:
				delete(w.keys, key)
				delete(w.created, key)
			}
		}
		if err := w.publish(); err != nil {
			return err
		}
	}
	select {
	case <-lostErr:
		return errLost
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("the watch was closed")
}

// awaitFailure waits until the client's connection fails (every endpoint
// refused or timed out) and reports true, or until ctx ends.
func (w *Watcher) awaitFailure(ctx context.Context) bool {
	conn := w.cli.ActiveConnection()
	for {
		s := conn.GetState()
		if s == connectivity.TransientFailure {
			return true
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// parse reads one key's value. A value that is not a backend, or names
// relay itself, is logged and the key keeps what it held in prev, if
// anything: a bad write must not take a working backend out.
func (w *Watcher) parse(key string, value []byte, prev map[string]Backend) (Backend, bool) {
	b, err := Parse(key, value)
	if err == nil && w.self != nil {
		if u, perr := url.Parse(b.URL); perr == nil {
			if msg, self := w.self(u); self {
				err = fmt.Errorf("etcd key %q: url: %s", key, msg)
			}
		}
	}
	if err == nil {
		return b, true
	}
	old, had := prev[key]
	if had {
		w.log.Error("discovery: ignored a value that is not a backend; the key keeps its last valid one", "err", err.Error(), "backend", old.URL)
	} else {
		w.log.Error("discovery: ignored a value that is not a backend", "err", err.Error())
	}
	return old, had
}

// publish hands the current set to apply when it differs from the last
// one applied. Two keys naming the same URL in the same pool are one
// backend, the first key's; the same URL in two pools is a backend of
// each. A set apply refuses is an *applyError, and offered again next
// time.
func (w *Watcher) publish() error {
	set := make([]Backend, 0, len(w.keys))
	for _, b := range w.keys {
		set = append(set, b)
	}
	slices.SortFunc(set, func(a, b Backend) int { return cmp.Compare(a.Key, b.Key) })
	type member struct{ pool, url string }
	seen := make(map[member]string, len(set))
	dups := map[string]bool{}
	kept := set[:0]
	for _, b := range set {
		m := member{b.Pool, b.URL}
		if first, dup := seen[m]; dup {
			if !w.dups[b.Key] {
				w.log.Warn("discovery: two keys name one backend of one pool; the first key's counts", "pool", b.Pool, "backend", b.URL, "key", b.Key, "first", first)
			}
			dups[b.Key] = true
			continue
		}
		seen[m] = b.Key
		kept = append(kept, b)
	}
	w.dups = dups
	if slices.Equal(kept, w.applied) && w.applied != nil {
		return nil
	}
	if err := w.apply(slices.Clone(kept)); err != nil {
		w.applied = nil
		return &applyError{err}
	}
	if w.refusal != "" {
		w.refusal = ""
		w.log.Info("discovery: the backends found in etcd are applied", "backends", len(kept))
	}
	w.applied = kept
	return nil
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
