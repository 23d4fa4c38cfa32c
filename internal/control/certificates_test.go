package control

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/supervisor"
)

// slowACME answers every lookup after release is closed, counting them.
type slowACME struct {
	lookups atomic.Int32
	release chan struct{}
}

func (a *slowACME) Challenge(ctx context.Context, host string) ([]byte, bool, error) {
	a.lookups.Add(1)
	<-a.release
	return []byte(`{"type":"tls-alpn-01"}`), true, nil
}

func (a *slowACME) Counts() ACMECounts { return ACMECounts{} }

// TestChallengeAsksShareALookup: asks for one host while its lookup runs
// wait for that lookup (one storage read however many handshakes a
// client makes), and every ask gets its answer, with its own ID; a
// certificate published before a process attaches reaches it before the
// health snapshot, so Follow has it applied when it returns.
func TestChallengeAsksShareALookup(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, nil, 50, slog.New(slog.DiscardHandler))
	a := &slowACME{release: make(chan struct{})}
	l.SetACME(a)
	l.PublishCertificate(supervisor.Certificate{Names: []string{"a.relay.test"}, Chain: []byte("c"), Key: []byte("k")}, time.Now())
	p := attachProcess(t, l, 0)
	var mu sync.Mutex
	var certs []string
	answers := map[uint64]bool{}
	got := make(chan struct{}, 64)
	err := follow(p, nil, Updates{
		Certificate: func(c supervisor.Certificate) { mu.Lock(); certs = append(certs, c.Names[0]); mu.Unlock() },
		Challenge: func(c supervisor.Challenge) {
			mu.Lock()
			answers[c.ID] = c.Found
			mu.Unlock()
			got <- struct{}{}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(certs) != 1 {
		t.Errorf("certificates applied when Follow returned: %v, want a.relay.test", certs)
	}
	mu.Unlock()
	const asks = 20
	for id := uint64(1); id <= asks; id++ {
		if err := p.Send(supervisor.Message{Kind: supervisor.KindChallenge, Challenge: &supervisor.Challenge{ID: id, Host: "a.relay.test"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every ask waiting on the one lookup", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.looking["a.relay.test"]) == asks
	})
	close(a.release)
	for range asks {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d asks answered", len(answers), asks)
		}
	}
	if n := a.lookups.Load(); n != 1 {
		t.Errorf("%d lookups for %d concurrent asks of one host, want 1", n, asks)
	}
	for id := uint64(1); id <= asks; id++ {
		if !answers[id] {
			t.Errorf("ask %d was not answered with the challenge", id)
		}
	}
}
