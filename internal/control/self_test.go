package control

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"relay/internal/config"
	"relay/internal/supervisor"
)

// TestControlRefusesItselfAsBackend: relay's own addresses, as
// configured and as bound, are no backend: the admin API's add and a
// reload naming one are refused with ErrInvalid and change nothing.
func TestControlRefusesItselfAsBackend(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	l.SetListeners(config.Listeners{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:19901"})
	// Port 0 is nobody's until relay listens.
	if _, err := l.Add("default", "http://127.0.0.1:18080", 1); err != nil {
		t.Fatalf("before relay listens: %v", err)
	}
	l.SetListeners(config.Listeners{Listen: "[::]:18081"})
	for _, c := range []struct{ url, which string }{
		{"http://localhost:18081", `listen "[::]:18081"`},
		{"http://127.0.0.1:19901", `admin_listen "127.0.0.1:19901"`},
	} {
		_, err := l.Add("default", c.url, 1)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.which) || !strings.Contains(err.Error(), "relay's own address") {
			t.Errorf("Add(%s): %v; want ErrInvalid naming %s", c.url, err, c.which)
		}
	}
	ms := []supervisor.Member{{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 1}, {Pool: "default", URL: "http://127.0.0.1:18081", Weight: 1}}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(50), ms, nil, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "http://127.0.0.1:18081") {
		t.Errorf("a reload naming relay itself: %v; want ErrInvalid naming the backend", err)
	}
	if len(l.members) != 2 || l.Generation() != 1 {
		t.Errorf("refused calls changed the control: %d members, generation %d", len(l.members), l.Generation())
	}
}

// TestInstanceIDIsKept: every process attached to one control gets the
// same instance id and sticky-cookie key, a reload keeps them, and another
// control has others.
func TestInstanceIDIsKept(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	first := attachProcess(t, l, 0).Config
	id, key := first.Instance, first.StickyKey
	if len(id) != 2*instanceBytes {
		t.Fatalf("instance id %q, want %d hex digits", id, 2*instanceBytes)
	}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(50), []supervisor.Member{{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 1}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := attachProcess(t, l, 1).Config; got.Generation != 2 || got.Instance != id || string(got.StickyKey) != string(key) {
		t.Errorf("after a reload a process gets generation %d, instance %q, sticky key %x; want 2, %q, %x", got.Generation, got.Instance, got.StickyKey, id, key)
	}
	other := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	if other.config.Instance == id {
		t.Errorf("two controls share the instance id %q", id)
	}
	if string(other.config.StickyKey) == string(key) {
		t.Errorf("two controls share the sticky key %x", key)
	}
}
