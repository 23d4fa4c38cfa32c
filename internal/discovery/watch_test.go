package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"relay/internal/config"
	"relay/internal/etcdtest"
	"relay/internal/testlog"
)

const prefix = "/relay/backends/"

// sets records what a Watcher applies.
type sets struct {
	mu      sync.Mutex
	all     [][]Backend
	changed chan struct{}
}

func newSets() *sets { return &sets{changed: make(chan struct{}, 1)} }

func (s *sets) apply(set []Backend) error {
	s.mu.Lock()
	s.all = append(s.all, set)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return nil
}

func (s *sets) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

func (s *sets) last() []Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 {
		return nil
	}
	return s.all[len(s.all)-1]
}

// await waits until the last set applied is want (URL=weight, or
// POOL:URL=weight outside the default pool, sorted by key) and returns how
// long that took.
func (s *sets) await(t *testing.T, within time.Duration, want ...string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		if got := describe(s.last()); slices.Equal(got, want) {
			return time.Since(start)
		}
		select {
		case <-s.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("after %v the set is %v, want %v", within, describe(s.last()), want)
		}
	}
}

func describe(set []Backend) []string {
	out := []string{}
	for _, b := range set {
		if b.Pool != config.DefaultPool {
			out = append(out, fmt.Sprintf("%s:%s=%d", b.Pool, b.URL, b.Weight))
			continue
		}
		out = append(out, fmt.Sprintf("%s=%d", b.URL, b.Weight))
	}
	return out
}

func newLog() (*slog.Logger, *testlog.Buffer) { return testlog.New() }

// awaitLog waits a little for a line the watcher writes after apply
// returns, and reports whether it came.
func awaitLog(logs *testlog.Buffer, s string) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if logs.Count(s) > 0 {
			return true
		}
	}
	return false
}

// quickBackoff makes the retries of a test that stops etcd come fast.
func quickBackoff(t *testing.T) {
	minB, maxB := MinBackoff, MaxBackoff
	MinBackoff, MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	t.Cleanup(func() { MinBackoff, MaxBackoff = minB, maxB })
}

func settings(ep string) *config.Etcd {
	return &config.Etcd{Endpoints: []string{ep}, Prefix: prefix, DialTimeout: 2 * time.Second}
}

func value(url string, weight int) string { return string(Marshal(url, weight)) }

func TestWatchListsThenFollowsPutsAndDeletes(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 1))
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 2))
	srv.Put(cli, "/relay/other", value("http://127.0.0.1:9999", 1)) // outside the prefix
	log, _ := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=2", "http://127.0.0.1:8002=1")

	var slowest time.Duration
	step := func(do func(), want ...string) {
		do()
		slowest = max(slowest, got.await(t, time.Second, want...))
	}
	step(func() { srv.Put(cli, prefix+"c", value("http://127.0.0.1:8003", 1)) },
		"http://127.0.0.1:8001=2", "http://127.0.0.1:8002=1", "http://127.0.0.1:8003=1")
	step(func() { srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 5)) },
		"http://127.0.0.1:8001=2", "http://127.0.0.1:8002=5", "http://127.0.0.1:8003=1")
	step(func() { srv.Delete(cli, prefix+"a") },
		"http://127.0.0.1:8002=5", "http://127.0.0.1:8003=1")
	t.Logf("slowest change reached apply in %v", slowest)

	// A put that changes nothing is not handed on.
	n := got.count()
	srv.Put(cli, prefix+"c", value("http://127.0.0.1:8003", 1))
	srv.Put(cli, prefix+"d", value("http://127.0.0.1:8003/", 1)) // the same backend under a second key
	srv.Put(cli, prefix+"e", value("http://127.0.0.1:8004", 1))
	got.await(t, time.Second, "http://127.0.0.1:8002=5", "http://127.0.0.1:8003=1", "http://127.0.0.1:8004=1")
	if got.count() != n+1 {
		t.Errorf("%d sets applied for one change, want 1", got.count()-n)
	}
}

// TestWatchFillsSeveralPools: one URL under two keys of two pools is a
// backend of each; under two keys of one pool it is one backend, the first
// key's, and the log says so once; a key whose value names another pool
// moves its backend there.
func TestWatchFillsSeveralPools(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 2))
	srv.Put(cli, prefix+"api/a", string(MarshalPool("http://127.0.0.1:8001", 3, "api")))
	srv.Put(cli, prefix+"api/b", string(MarshalPool("http://127.0.0.1:8002", 1, "api")))
	log, logs := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=2", "api:http://127.0.0.1:8001=3", "api:http://127.0.0.1:8002=1")
	for _, b := range got.last() {
		if want := map[string]string{prefix + "a": "default", prefix + "api/a": "api", prefix + "api/b": "api"}[b.Key]; b.Pool != want {
			t.Errorf("key %s: pool %q, want %q", b.Key, b.Pool, want)
		}
	}

	// The same URL twice in pool api: the first key's counts.
	srv.Put(cli, prefix+"api/c", `{"url": "http://127.0.0.1:8002/", "weight": 9, "pool": "api"}`)
	srv.Put(cli, prefix+"z", value("http://127.0.0.1:8009", 1)) // a marker: api/c came before it
	got.await(t, time.Second, "http://127.0.0.1:8001=2", "api:http://127.0.0.1:8001=3", "api:http://127.0.0.1:8002=1", "http://127.0.0.1:8009=1")
	if !awaitLog(logs, "two keys name one backend of one pool") || !strings.Contains(logs.String(), `/relay/backends/api/c`) {
		t.Errorf("the log does not name the second key of one backend:\n%s", logs)
	}

	// Key a moves to pool web; deleting api/b lets api/c count.
	srv.Put(cli, prefix+"a", `{"url": "http://127.0.0.1:8001", "weight": 2, "pool": "web"}`)
	got.await(t, time.Second, "web:http://127.0.0.1:8001=2", "api:http://127.0.0.1:8001=3", "api:http://127.0.0.1:8002=1", "http://127.0.0.1:8009=1")
	srv.Delete(cli, prefix+"api/b")
	got.await(t, time.Second, "web:http://127.0.0.1:8001=2", "api:http://127.0.0.1:8001=3", "api:http://127.0.0.1:8002=9", "http://127.0.0.1:8009=1")

	// A value naming a bad pool is ignored, and the key keeps its last
	// valid value.
	srv.Put(cli, prefix+"a", `{"url": "http://127.0.0.1:8001", "pool": "Web"}`)
	srv.Delete(cli, prefix+"z") // a marker: the bad put came before it
	got.await(t, time.Second, "web:http://127.0.0.1:8001=2", "api:http://127.0.0.1:8001=3", "api:http://127.0.0.1:8002=9")
	if !strings.Contains(logs.String(), `got \"Web\"`) {
		t.Errorf("the log does not name the bad pool:\n%s", logs)
	}
	if n := logs.Count("two keys name one backend"); n != 1 {
		t.Errorf("the duplicate was logged %d times, want once", n)
	}
}

func TestWatchKeepsTheLastValidValue(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 2))
	srv.Put(cli, prefix+"bad", `{"url": "nowhere"}`)
	log, logs := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=2")

	srv.Put(cli, prefix+"a", `{"url": "http://127.0.0.1:8001", "weight": "heavy"}`)
	srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 1)) // a marker: the bad put came before it
	got.await(t, time.Second, "http://127.0.0.1:8001=2", "http://127.0.0.1:8002=1")
	for _, want := range []string{`etcd key \"/relay/backends/bad\"`, `etcd key \"/relay/backends/a\"`, "keeps its last valid one"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
	srv.Delete(cli, prefix+"a")
	got.await(t, time.Second, "http://127.0.0.1:8002=1")
}

// TestWatchRefusesRelayItself: a value naming relay's own address is
// not a backend; the key keeps its last valid value, and the log says
// why.
func TestWatchRefusesRelayItself(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1))
	srv.Put(cli, prefix+"self", value("http://localhost:18080", 1))
	log, logs := newLog()
	got := newSets()
	self := config.SelfAddress(config.Listeners{Listen: ":18080"})
	w := Watch(settings(srv.Endpoint), log, got.apply, self)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=1")

	srv.Put(cli, prefix+"a", value("http://127.0.0.1:18080", 1))
	srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 1)) // a marker: the bad put came before it
	got.await(t, time.Second, "http://127.0.0.1:8001=1", "http://127.0.0.1:8002=1")
	for _, want := range []string{`etcd key \"/relay/backends/self\"`, `etcd key \"/relay/backends/a\"`,
		"relay's own address (listen \\\":18080\\\")", "keeps its last valid one"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
}

func TestWatchDropsAKeyWhoseLeaseExpires(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	log, _ := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second)

	const ttl = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1), clientv3.WithLease(lease.ID))
	got.await(t, time.Second, "http://127.0.0.1:8001=1")
	put := time.Now()
	got.await(t, ttl+time.Second)
	t.Logf("gone %v after the last keep-alive (ttl %v)", time.Since(put).Round(time.Millisecond), ttl)
}

func TestWatchKeepsTheSetWhileEtcdIsDownAndResyncs(t *testing.T) {
	quickBackoff(t)
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1))
	srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 1))
	log, logs := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=1", "http://127.0.0.1:8002=1")
	n := got.count()

	srv.Stop()
	time.Sleep(3 * time.Second)
	if got.count() != n {
		t.Fatalf("the set changed while etcd was down: %v", describe(got.last()))
	}
	if c := logs.Count("lost etcd") + logs.Count("cannot be reached"); c != 1 {
		t.Errorf("%d lines about losing etcd, want 1:\n%s", c, logs)
	}
	srv.Start()
	cli = srv.Client()
	srv.Delete(cli, prefix+"a")
	srv.Put(cli, prefix+"c", value("http://127.0.0.1:8003", 3))
	got.await(t, 10*time.Second, "http://127.0.0.1:8002=1", "http://127.0.0.1:8003=3")
	if !awaitLog(logs, "etcd answers again") { // logged once the list has returned
		t.Errorf("the log does not say etcd came back:\n%s", logs)
	}
}

func TestWatchStartsWithoutEtcdAndListsWhenItComes(t *testing.T) {
	quickBackoff(t)
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1))
	srv.Stop()
	log, logs := newLog()
	got := newSets()
	e := settings(srv.Endpoint)
	e.DialTimeout = 300 * time.Millisecond
	w := Watch(e, log, got.apply, nil)
	defer w.Stop()
	time.Sleep(2 * time.Second)
	if got.count() != 0 {
		t.Fatalf("applied %v with etcd down", describe(got.last()))
	}
	if logs.Count("cannot be reached at start") != 1 {
		t.Errorf("want one line saying etcd cannot be reached at start:\n%s", logs)
	}
	srv.Start()
	got.await(t, 10*time.Second, "http://127.0.0.1:8001=1")
}

func TestWatchListsAgainWhenItsRevisionWasCompacted(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1))
	// Between the first list and its watch, the key changes and the
	// history is compacted past the list's revision: the watch cannot
	// start where the list ended, and the watcher must list again.
	var once sync.Once
	testHookListed = func(rev int64) {
		once.Do(func() {
			srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 2))
			srv.Put(cli, prefix+"b", value("http://127.0.0.1:8002", 1))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := cli.Get(ctx, "x")
			if err == nil {
				_, err = cli.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical())
			}
			if err != nil {
				t.Errorf("compact: %v", err)
			}
		})
	}
	t.Cleanup(func() { testHookListed = nil })
	log, logs := newLog()
	got := newSets()
	w := Watch(settings(srv.Endpoint), log, got.apply, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=1", "http://127.0.0.1:8002=1")
	if !strings.Contains(logs.String(), "compacted") {
		t.Errorf("the log does not say the revision was compacted:\n%s", logs)
	}
}

// TestWatchOffersARefusedSetAgain: when apply refuses a set (a backend's
// TLS files unreadable a moment), the watcher offers it again after a
// backoff, with no change in etcd needed, logging the reason once.
func TestWatchOffersARefusedSetAgain(t *testing.T) {
	quickBackoff(t)
	srv := etcdtest.Start(t)
	cli := srv.Client()
	srv.Put(cli, prefix+"a", value("http://127.0.0.1:8001", 1))
	log, logs := newLog()
	got := newSets()
	var refusals atomic.Int32
	w := Watch(settings(srv.Endpoint), log, func(set []Backend) error {
		if refusals.Add(1) <= 2 {
			return errors.New("the CA file cannot be read")
		}
		return got.apply(set)
	}, nil)
	defer w.Stop()
	got.await(t, 5*time.Second, "http://127.0.0.1:8001=1")
	if refusals.Load() != 3 {
		t.Errorf("apply was called %d times, want 3 (two refusals, then the set)", refusals.Load())
	}
	awaitLog(logs, "are applied") // logged once apply has returned
	if a, b := logs.Count("could not be applied"), logs.Count("are applied"); a != 1 || b != 1 {
		t.Errorf("%d lines about the refusals (one reason) and %d about the recovery, want 1 and 1:\n%s", a, b, logs)
	}
}
