package control

import (
	"errors"
	"log/slog"
	"testing"

	"relay/internal/backend"
	"relay/internal/supervisor"
)

// A reload refused because one backend cannot be readied leaves the
// backends that stay as they were: their weight, request cap and TLS
// settings change only once every backend of the new membership checks
// out.
func TestRefusedReloadLeavesStayingBackendsAlone(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 100, slog.New(slog.DiscardHandler))
	readied := map[string]int{}
	l.Prepare = func(b *backend.Backend) (func(), error) {
		if b.Name == "http://127.0.0.1:8002" {
			return nil, errors.New("cannot read its CA file")
		}
		return func() { readied[b.Name]++ }, nil
	}
	x := bs[0]
	ms := []supervisor.Member{{Pool: "default", URL: x.Name, Weight: 7, MaxRequests: 10}, {Pool: "default", URL: bs[1].Name, Weight: 1}}
	adopted := 0
	adopt := func() { adopted++ }
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), ms, nil, adopt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reload: %v, want it refused as invalid", err)
	}
	if l.Generation() != 1 {
		t.Errorf("generation %d after a refused reload, want 1", l.Generation())
	}
	if x.MaxRequests() != 0 || x.EffectiveWeight() != 1 || readied[x.Name] != 0 || adopted != 0 {
		t.Errorf("the refused reload changed %s: max_requests %d, effective weight %d, readied %d times, adopted %d times; want 0, 1, 0, 0",
			x.Name, x.MaxRequests(), x.EffectiveWeight(), readied[x.Name], adopted)
	}
	// The same change without the failing backend goes through whole.
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), ms[:1], nil, adopt); err != nil {
		t.Fatal(err)
	}
	if x.MaxRequests() != 10 || x.EffectiveWeight() != 7 || readied[x.Name] != 1 || l.Generation() != 2 || adopted != 1 {
		t.Errorf("after the accepted reload: max_requests %d, effective weight %d, readied %d times, generation %d, adopted %d times; want 10, 7, 1, 2, 1",
			x.MaxRequests(), x.EffectiveWeight(), readied[x.Name], l.Generation(), adopted)
	}
}
