package discovery

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"relay/internal/etcdtest"
)

// held returns key's value, or "" when etcd has no such key.
func held(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}

func awaitHeld(t *testing.T, cli *clientv3.Client, key, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for held(t, cli, key) != want {
		if time.Now().After(deadline) {
			t.Fatalf("after %v key %s holds %q, want %q", within, key, held(t, cli, key), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRegisterKeepsTheKeyAndWithdrawsIt(t *testing.T) {
	quickBackoff(t)
	srv := etcdtest.Start(t)
	cli := srv.Client()
	log, logs := newLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// 3 s, not etcd's shortest 2 s: on a loaded machine a keep-alive
	// answer may come late enough for the client to give a 2 s lease up.
	const key, ttl = prefix + "me", 3 * time.Second
	v := Marshal("http://127.0.0.1:8001", 2)
	go func() {
		Register(ctx, settings(srv.Endpoint), key, v, ttl, log)
		close(done)
	}()
	awaitHeld(t, cli, key, string(v), 5*time.Second)

	// Kept alive past two TTLs.
	time.Sleep(2 * ttl)
	if got := held(t, cli, key); got != string(v) {
		t.Fatalf("after 2 TTLs the key holds %q", got)
	}

	// The lease taken away (as when etcd expired it): announced again.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	leases, err := cli.Leases(ctx2)
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases: %v %v", leases, err)
	}
	if _, err := cli.Revoke(ctx2, leases.Leases[0].ID); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, cli, key, string(v), 5*time.Second)
	if logs.Count("lease was lost") < 1 {
		t.Errorf("no line about the lost lease:\n%s", logs)
	}

	// Ending Register revokes the lease: the key goes at once, not a TTL later.
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Register did not return after its context ended")
	}
	if got := held(t, cli, key); got != "" {
		t.Fatalf("the key still holds %q after Register returned; its log:\n%s", got, logs)
	}
}
