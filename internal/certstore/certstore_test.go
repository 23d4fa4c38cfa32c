package certstore

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"relay/internal/etcdtest"
	"relay/internal/redistest"
)

type store interface {
	certmagic.Storage
	certmagic.TryLocker
	certmagic.LockLeaseRenewer
}

// instance is one relay instance's store, and how to kill its connection
// without unlocking anything.
type instance struct {
	store
	kill func()
}

// backend makes instances sharing one server.
type backend struct {
	name string
	new  func(t *testing.T, lease time.Duration) instance
}

// backends starts a real etcd and a real redis-server for t.
func backends(t *testing.T) []backend {
	srv := etcdtest.Start(t)
	rs := redistest.Start(t)
	return []backend{
		{"etcd", func(t *testing.T, lease time.Duration) instance {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			kill := func() { once.Do(func() { cli.Close() }) }
			t.Cleanup(kill)
			return instance{NewEtcd(cli, EtcdOptions{Prefix: "/" + t.Name() + "/", Lease: lease}), kill}
		}},
		{"redis", func(t *testing.T, lease time.Duration) instance {
			c := redis.NewClient(&redis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
			var once sync.Once
			kill := func() { once.Do(func() { c.Close() }) }
			t.Cleanup(kill)
			return instance{NewRedis(c, RedisOptions{Prefix: t.Name() + ":", Lease: lease}), kill}
		}},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStorage(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := b.new(t, 2*time.Second)
			ctx := ctxT(t)
			put := func(k, v string) {
				t.Helper()
				if err := s.Store(ctx, k, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			notExist := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: %v, want fs.ErrNotExist", what, err)
				}
			}
			list := func(dir string, rec bool, want ...string) {
				t.Helper()
				got, err := s.List(ctx, dir, rec)
				if err != nil {
					t.Fatalf("List(%q, %v): %v", dir, rec, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("List(%q, %v) = %q, want %q", dir, rec, got, want)
				}
			}

			before := time.Now()
			put("certs/a.example/a.crt", "crt-a")
			put("certs/a.example/a.key", "key-a")
			put("certs/b.example/b.crt", "crt-b")
			put("/acme/account.json/", "{}") // slashes at the ends are trimmed
			put("certs/a.example/a.crt", "crt-a2")

			if v, err := s.Load(ctx, "certs/a.example/a.crt"); err != nil || string(v) != "crt-a2" {
				t.Errorf("Load = %q, %v", v, err)
			}
			if v, err := s.Load(ctx, "acme/account.json"); err != nil || string(v) != "{}" {
				t.Errorf("Load = %q, %v", v, err)
			}
			_, err := s.Load(ctx, "certs/nope")
			notExist("Load missing", err)
			_, err = s.Load(ctx, "certs")
			notExist("Load of a directory", err)

			ki, err := s.Stat(ctx, "certs/a.example/a.crt")
			if err != nil || ki.Key != "certs/a.example/a.crt" || !ki.IsTerminal || ki.Size != 6 || ki.Modified.Before(before.Add(-time.Second)) || ki.Modified.After(time.Now().Add(time.Second)) {
				t.Errorf("Stat file = %+v, %v", ki, err)
			}
			ki, err = s.Stat(ctx, "certs/a.example")
			if err != nil || ki.Key != "certs/a.example" || ki.IsTerminal {
				t.Errorf("Stat dir = %+v, %v", ki, err)
			}
			_, err = s.Stat(ctx, "certs/a.exam")
			notExist("Stat of a key's prefix that is not a directory", err)

			for k, want := range map[string]bool{"certs": true, "certs/a.example/a.key": true, "certs/a": false, "nope": false, "certs/a.example/a.crt/x": false} {
				if got := s.Exists(ctx, k); got != want {
					t.Errorf("Exists(%q) = %v", k, got)
				}
			}

			list("certs", false, "certs/a.example", "certs/b.example")
			list("certs", true, "certs/a.example", "certs/a.example/a.crt", "certs/a.example/a.key", "certs/b.example", "certs/b.example/b.crt")
			list("certs/a.example", false, "certs/a.example/a.crt", "certs/a.example/a.key")
			list("", false, "acme", "certs")
			_, err = s.List(ctx, "nope", true)
			notExist("List missing", err)

			if err := s.Delete(ctx, "certs/a.example"); err != nil {
				t.Fatal(err)
			}
			_, err = s.Load(ctx, "certs/a.example/a.key")
			notExist("Load after Delete of its directory", err)
			_, err = s.Stat(ctx, "certs/a.example")
			notExist("Stat of a deleted directory", err)
			list("certs", true, "certs/b.example", "certs/b.example/b.crt")
			if err := s.Delete(ctx, "certs/a.example"); err != nil {
				t.Errorf("Delete of a missing key: %v", err)
			}
			if err := s.Delete(ctx, "acme/account.json"); err != nil {
				t.Fatal(err)
			}
			list("", true, "certs", "certs/b.example", "certs/b.example/b.crt")

			big := make([]byte, MaxValueSize+1)
			err = s.Store(ctx, "certs/huge.crt", big)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "certs/huge.crt") {
				t.Errorf("Store of %d bytes: %v", len(big), err)
			}
			if err := s.Store(ctx, "certs/max.crt", big[:MaxValueSize]); err != nil {
				t.Errorf("Store of %d bytes: %v", MaxValueSize, err)
			}
		})
	}
}

// TestLockExclusive has two instances, four goroutines each, contend for
// one name: one holds it at a time.
func TestLockExclusive(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			a, c := b.new(t, 2*time.Second), b.new(t, 2*time.Second)
			var holders, most, turns atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				s := a
				if i%2 == 1 {
					s = c
				}
				wg.Go(func() {
					for range 10 {
						if err := s.Lock(ctx, "issue/example.com"); err != nil {
							t.Error(err)
							return
						}
						n := holders.Add(1)
						if n > most.Load() {
							most.Store(n)
						}
						turns.Add(1)
						holders.Add(-1)
						if err := s.Unlock(ctx, "issue/example.com"); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if most.Load() != 1 || turns.Load() != 80 {
				t.Errorf("at most %d holders at once, %d turns; want 1 and 80", most.Load(), turns.Load())
			}
		})
	}
}

// TestLockTry: TryLock of a held name is false, in another instance and
// in the same one; after Unlock it is true.
func TestLockTry(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			a, c := b.new(t, 2*time.Second), b.new(t, 2*time.Second)
			if ok, err := a.TryLock(ctx, "n"); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			for i, s := range []store{a, c} {
				if ok, err := s.TryLock(ctx, "n"); ok || err != nil {
					t.Errorf("instance %d: TryLock of a held name = %v, %v", i, ok, err)
				}
			}
			if err := a.RenewLockLease(ctx, "n", time.Minute); err != nil {
				t.Errorf("RenewLockLease: %v", err)
			}
			if err := c.RenewLockLease(ctx, "n", time.Minute); !errors.Is(err, ErrNotLocked) {
				t.Errorf("RenewLockLease by a non-holder: %v", err)
			}
			if err := c.Unlock(ctx, "n"); !errors.Is(err, ErrNotLocked) {
				t.Errorf("Unlock by a non-holder: %v", err)
			}
			if err := a.Unlock(ctx, "n"); err != nil {
				t.Fatal(err)
			}
			if ok, err := c.TryLock(ctx, "n"); !ok || err != nil {
				t.Errorf("TryLock of a freed name = %v, %v", ok, err)
			}
			if err := c.Unlock(ctx, "n"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestLockContext: Lock of a held name returns when its ctx is done, in
// another instance and in the same one.
func TestLockContext(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			a, c := b.new(t, 2*time.Second), b.new(t, 2*time.Second)
			if err := a.Lock(ctx, "n"); err != nil {
				t.Fatal(err)
			}
			for i, s := range []store{a, c} {
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				start := time.Now()
				err := s.Lock(wctx, "n")
				cancel()
				if took := time.Since(start); err == nil || took > 2*time.Second {
					t.Errorf("instance %d: Lock of a held name with a 300ms context: %v after %v", i, err, took)
				}
			}
			if err := a.Unlock(ctx, "n"); err != nil {
				t.Fatal(err)
			}
			// A cancelled wait left nothing behind.
			if ok, err := c.TryLock(ctx, "n"); !ok || err != nil {
				t.Errorf("TryLock after cancelled waits = %v, %v", ok, err)
			}
		})
	}
}

// TestLockHolderDies: a holder whose connection dies without unlocking
// frees the lock for another instance within two lease periods.
func TestLockHolderDies(t *testing.T) {
	const lease = 2 * time.Second
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			a, c := b.new(t, lease), b.new(t, lease)
			if err := a.Lock(ctx, "issue/example.com"); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, 4*lease)
			defer cancel()
			go func() { got <- c.Lock(wctx, "issue/example.com") }()
			// Held past a lease while its holder lives: the lease is renewed.
			select {
			case err := <-got:
				t.Fatalf("Lock of a live holder's name returned: %v", err)
			case <-time.After(lease + lease/2):
			}
			a.kill()
			start := time.Now()
			err := <-got
			took := time.Since(start)
			t.Logf("%s: lock taken over %v after its holder died (lease %v)", b.name, took.Round(time.Millisecond), lease)
			if err != nil || took > 2*lease {
				t.Fatalf("Lock after the holder died: %v after %v, want within %v", err, took, 2*lease)
			}
			if err := c.Unlock(ctx, "issue/example.com"); err != nil {
				t.Error(err)
			}
		})
	}
}
