package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/redistest"
)

// TestRedisAnswersErrors: a Redis that answers PING but refuses the
// limit's script (an ACL user without EVAL; writes refused for memory)
// is a store that cannot give an answer: requests get the limit's
// failure answer, at once, and the log says so once, rather than once a
// second as each probe's PING marks it up and the next request's script
// marks it down again. Once Redis takes the script, the limit is back.
func TestRedisAnswersErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup []any
		undo  []any
		opts  RedisOptions
	}{
		{"no eval", []any{"ACL", "SETUSER", "noeval", "on", ">pw", "~*", "+@all", "-eval", "-evalsha"},
			[]any{"ACL", "SETUSER", "noeval", "+eval", "+evalsha"}, RedisOptions{Username: "noeval", Password: "pw"}},
		{"out of memory", []any{"CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "noeviction"},
			[]any{"CONFIG", "SET", "maxmemory", "0"}, RedisOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client()
			if err := admin.Do(context.Background(), tc.setup...).Err(); err != nil {
				t.Fatal(err)
			}
			log := &logLines{}
			o := tc.opts
			o.Address, o.Logger, o.Timeout = srv.Addr(), slog.New(log), testTimeout
			r := NewRedis(o)
			t.Cleanup(func() { r.Close() })
			l := r.Limit("errors", Spec{Rate: 1, Burst: 1}, FailClosed)
			k := []byte("k")
			eventually(t, 2*time.Second, "the store logs the failure", func() bool {
				l.Take(k, time.Now())
				return log.count("rate limit store unreachable") > 0
			})
			// Three probes' time, under a request every few milliseconds.
			for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if d := l.Take(k, time.Now()); d.Allowed || d.Wait != time.Second {
					t.Fatalf("fail closed with the script refused: %+v", d)
				}
			}
			if n := log.count("rate limit store unreachable"); n != 1 || log.count("rate limit store reachable again") != 0 {
				t.Fatalf("logged:\n%s\nwant one line for the failure and none for a return", log)
			}
			// Redis takes the script again: the store is back by itself.
			if err := admin.Do(context.Background(), tc.undo...).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 3*time.Second, "the limit answers from Redis again", func() bool { return l.Take(k, time.Now()).Allowed })
			if log.count("rate limit store reachable again") != 1 {
				t.Fatalf("logged:\n%s\nwant one line for the return", log)
			}
		})
	}
}

// TestRedisProbeWithinBucketKeys: a Redis user allowed relay's bucket
// keys alone (prefix + "rl:*") can run the probe too, so a store marked
// down while Redis paused comes back once Redis answers again.
func TestRedisProbeWithinBucketKeys(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "buckets", "on", ">pw", "~relay:rl:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	log := &logLines{}
	// Half the pause: the pause marks the store down, and a Redis that
	// is back answers a loaded machine within it.
	r := NewRedis(RedisOptions{Address: srv.Addr(), Username: "buckets", Password: "pw", Timeout: 150 * time.Millisecond, Logger: slog.New(log)})
	t.Cleanup(func() { r.Close() })
	l := r.Limit("acl", Spec{Rate: 1, Burst: 1}, FailClosed)
	if d := l.Take([]byte("a"), time.Now()); !d.Allowed {
		t.Fatalf("first take: %+v", d)
	}
	// Paused past the store's timeout: the next key's fetch marks it down.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	l.Take([]byte("b"), time.Now())
	eventually(t, time.Second, "the store logs Redis down", func() bool { return log.count("rate limit store unreachable") == 1 })
	eventually(t, 3*time.Second, "the store sees Redis back", func() bool { return log.count("rate limit store reachable again") == 1 })
	if d := l.Take([]byte("c"), time.Now()); !d.Allowed {
		t.Fatalf("a new key once Redis is back: %+v\n%s", d, log)
	}
}

// TestRedisOverloadIsSaid: when Redis is too slow for the new keys that
// arrive (the fetch queue is full), the requests that could not queue a
// fetch are answered as their limit's failure says, without waiting, and
// that is logged once in its interval with the count, not once a request,
// and without the store being marked down.
func TestRedisOverloadIsSaid(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	var log logLines
	r := NewRedis(RedisOptions{Address: srv.Addr(), Timeout: 2 * time.Second, Logger: slog.New(&log)})
	t.Cleanup(func() { r.Close() })
	l := r.Limit("overload", Spec{Rate: 1, Burst: 1}, FailClosed)
	ctx := context.Background()
	if !l.Take([]byte("warm"), time.Now()).Allowed { // the script is loaded
		t.Fatal("the first take of a fresh key was refused")
	}
	// Redis answers nothing for half a second, within the store's
	// timeout: fetches wait and the queue fills behind them.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	const clients = redisQueue + redisFetchers + 1000
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range clients {
		wg.Go(func() {
			if d := l.Take(fmt.Appendf(nil, "client-%d", i), time.Now()); !d.Allowed && d.Wait == failedWait {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatalf("no request was answered as the failure says with %d new keys behind a paused Redis", clients)
	}
	if n := log.count("rate limit store overloaded"); n != 1 {
		t.Errorf("%q logged %d times for %d overflowing requests, want once\n%s", "rate limit store overloaded", n, failed.Load(), &log)
	}
	if n := log.count("rate limit store unreachable"); n != 0 {
		t.Errorf("a slow Redis was marked down\n%s", &log)
	}
}

// TestRedisFailLocal: a limit whose failure is FailLocal takes its tokens
// from its instance's own buckets while Redis cannot be reached: exactly
// its burst at one instant, not everything (open) nor nothing (closed);
// and from Redis's once Redis is back. The down line says so.
func TestRedisFailLocal(t *testing.T) {
	srv := redistest.At(t, redistest.FreeAddr(t))
	log := &logLines{}
	r := newStore(t, srv.Addr(), log)
	spec := Spec{Rate: 1, Burst: 3}
	local := NewTable(1000).Limit("local", spec)
	l := r.LimitLocal("local", spec, local)
	k := []byte("client")
	now := time.Now()
	allowed := 0
	for range 10 {
		if l.Take(k, now).Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("Redis down: %d of 10 requests at one instant allowed, want the burst, 3", allowed)
	}
	eventually(t, 2*time.Second, "the store logs Redis down", func() bool { return log.count("rate limit store unreachable") > 0 })
	if n := log.count("rate limit store unreachable"); n != 1 || !strings.Contains(log.String(), "limited by each instance alone") {
		t.Errorf("logged:\n%s\nwant one down line saying requests are limited by each instance alone", log)
	}

	srv.Start()
	// The client's bucket appears in Redis once Redis answers again: the
	// local buckets never write there.
	c := srv.Client()
	eventually(t, 5*time.Second, "the limit takes from Redis again", func() bool {
		l.Take(k, time.Now())
		n, err := c.Exists(context.Background(), redisKey("relay:", "local", k)).Result()
		return err == nil && n == 1
	})
	if n := log.count("rate limit store reachable again"); n != 1 {
		t.Errorf("logged:\n%s\nwant one line for Redis back", log)
	}
}
