package acme

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	acmeapi "github.com/mholt/acmez/v3/acme"

	"relay/internal/pebbletest"
)

// TestBackoffSchedules: attempts that reached no answer are tried again
// soon, attempts the CA refused slowly, each on its own count, the last
// wait repeating.
func TestBackoffSchedules(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	refused := fmt.Errorf("obtaining: %w", acmeapi.Problem{Type: "urn:ietf:params:acme:error:unauthorized", Status: 403})
	busy := fmt.Errorf("obtaining: %w", acmeapi.Problem{Type: "urn:ietf:params:acme:error:serverInternal", Status: 503})
	var b backoff
	var got []string
	for _, err := range []error{down, down, busy, refused, down, refused, down, down, down, down, down, down} {
		got = append(got, b.next(err).String())
	}
	want := "2s 4s 8s 1m0s 16s 5m0s 30s 1m0s 2m0s 5m0s 10m0s 10m0s"
	if strings.Join(got, " ") != want {
		t.Errorf("waits %v, want %s", got, want)
	}
}

// logLines returns the JSON lines of buf whose msg is msg.
func logLines(t *testing.T, buf *syncBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, s := range strings.Split(buf.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(s), &l) == nil && l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLines polls buf until it holds n lines with msg, or fails.
func waitLines(t *testing.T, buf *syncBuffer, msg string, n int, within time.Duration) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ls := logLines(t, buf, msg); len(ls) >= n {
			return ls
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d %q lines within %v; log:\n%s", n, msg, within, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCADownAtStartAndBack: the CA is down when the manager starts;
// each failed attempt is one line naming the name, the CA's failure and
// the time to the next attempt (2 s, then 4 s); the CA comes back after
// the second, and the certificate is in hand by the third attempt,
// seconds later rather than certmagic's minute: one order.
func TestCADownAtStartAndBack(t *testing.T) {
	a := startAnswerer(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort})
	ca.Stop()
	var buf syncBuffer
	p := newPublished()
	startLogging(t, a, settings(ca, a, &certmagic.FileStorage{Path: t.TempDir()}, "down.relay.test"), p, &buf)
	lines := waitLines(t, &buf, "ACME order failed", 2, 15*time.Second)
	ca.Restart()
	back := time.Now()
	for i, l := range lines[:2] {
		if l["name"] != "down.relay.test" || l["refused_by_ca"] != false || l["retry_in"] != []string{"2s", "4s"}[i] || !strings.Contains(fmt.Sprint(l["err"]), "connection refused") {
			t.Errorf("failure line %d is %v; want the name, not refused, retry_in %s, the refused connection", i+1, l, []string{"2s", "4s"}[i])
		}
	}
	p.wait(t, "the certificate", func(g map[string][]Issued) bool { return len(g["down.relay.test"]) > 0 })
	took := time.Since(back)
	t.Logf("in hand %v after the CA came back", took.Round(10*time.Millisecond))
	if took > 6*time.Second {
		t.Errorf("in hand %v after the CA came back; the next attempt was at most 4 s away", took)
	}
	verify(t, ca, p.got["down.relay.test"][0], "down.relay.test")
	if n := ca.Orders(); n != 1 {
		t.Errorf("the CA saw %d orders, want 1", n)
	}
	if n := len(logLines(t, &buf, "ACME order failed")); n != 2 {
		t.Errorf("%d failure lines, want 2 (one per attempt while the CA was down)", n)
	}
}

// TestCARefusalRetriedSlowly: a CA that answers but cannot validate (no
// challenge answered on its ports) refuses the order: one line saying
// so, and the next attempt a minute away, not seconds.
func TestCARefusalRetriedSlowly(t *testing.T) {
	ca := pebbletest.Start(t, pebbletest.Options{})
	var buf syncBuffer
	p := newPublished()
	s := Settings{
		CA: ca.DirectoryURL(), Roots: ca.RootPool(), Email: "ops@relay.test",
		Names: []string{"refused.relay.test"}, TLSALPN01: true,
		ListenHost: "127.0.0.1", TLSPort: 1, Storage: &certmagic.FileStorage{Path: t.TempDir()},
	}
	m := startLogging(t, &answerer{}, s, p, &buf)
	l := waitLines(t, &buf, "ACME order failed", 1, 20*time.Second)[0]
	if l["name"] != "refused.relay.test" || l["refused_by_ca"] != true || l["retry_in"] != "1m0s" {
		t.Errorf("failure line %v; want the name, refused by the CA, retry_in 1m0s", l)
	}
	if c := m.Counts(); c.Orders != 1 || c.Failures != 1 {
		t.Errorf("counts %+v, want 1 order and 1 failure", c)
	}
	if n := len(logLines(t, &buf, "ACME order failed")); n != 1 {
		t.Errorf("%d failure lines for one failed order", n)
	}
}

// failingStorage is a storage that fails every call while down is set,
// as etcd or Redis out of reach does.
type failingStorage struct {
	certmagic.Storage
	down  atomic.Bool
	calls atomic.Int64
}

var errStorageDown = errors.New("storage unreachable: connection refused")

func (f *failingStorage) fail() error {
	f.calls.Add(1)
	if f.down.Load() {
		return errStorageDown
	}
	return nil
}

func (f *failingStorage) Lock(ctx context.Context, name string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Storage.Lock(ctx, name)
}

func (f *failingStorage) Unlock(ctx context.Context, name string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Storage.Unlock(ctx, name)
}

func (f *failingStorage) Store(ctx context.Context, key string, value []byte) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Storage.Store(ctx, key, value)
}

func (f *failingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Storage.Load(ctx, key)
}

func (f *failingStorage) Delete(ctx context.Context, key string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Storage.Delete(ctx, key)
}

func (f *failingStorage) Exists(ctx context.Context, key string) bool {
	return f.fail() == nil && f.Storage.Exists(ctx, key)
}

func (f *failingStorage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Storage.List(ctx, path, recursive)
}

func (f *failingStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := f.fail(); err != nil {
		return certmagic.KeyInfo{}, err
	}
	return f.Storage.Stat(ctx, key)
}

// TestStorageDownAtStart: the storage fails every call when the manager
// starts (certmagic's own background obtain gives up on such a name at
// once, without an event); relay logs the failure naming the name and
// the storage's error, tries again, and orders the name once the
// storage is back.
func TestStorageDownAtStart(t *testing.T) {
	a := startAnswerer(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort})
	st := &failingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	st.down.Store(true)
	var buf syncBuffer
	p := newPublished()
	m := startLogging(t, a, settings(ca, a, st, "stored.relay.test"), p, &buf)
	l := waitLines(t, &buf, "ACME order failed", 1, 10*time.Second)[0]
	if l["name"] != "stored.relay.test" || l["retry_in"] != "2s" || !strings.Contains(fmt.Sprint(l["err"]), errStorageDown.Error()) {
		t.Errorf("failure line %v; want the name, retry_in 2s, the storage's error", l)
	}
	st.down.Store(false)
	p.wait(t, "the certificate", func(g map[string][]Issued) bool { return len(g["stored.relay.test"]) > 0 })
	verify(t, ca, p.got["stored.relay.test"][0], "stored.relay.test")
	if n := ca.Orders(); n != 1 {
		t.Errorf("the CA saw %d orders, want 1", n)
	}
	if _, err := st.Storage.Load(context.Background(), certmagic.StorageKeys.SiteCert(m.issuer.IssuerKey(), "stored.relay.test")); errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the certificate is not in storage: %v", err)
	}
}
