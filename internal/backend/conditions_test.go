package backend

import (
	"sync"
	"testing"
	"time"
)

func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(mustParse(t, "http://127.0.0.1:8001"), 3)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEachConditionBlocksAlone checks every condition on its own: setting it
// takes the backend out, clearing it puts it back, and State says why.
func TestEachConditionBlocksAlone(t *testing.T) {
	tests := []struct {
		name   string
		set    func(b *Backend) bool
		clear  func(b *Backend) bool
		reason string
	}{
		{"failing checks", func(b *Backend) bool { return b.SetHealthy(false) }, func(b *Backend) bool { return b.SetHealthy(true) }, "failing health checks"},
		{"ejected", func(b *Backend) bool { return b.Eject(time.Now().Add(time.Hour)) }, func(b *Backend) bool { return b.Restore() }, "ejected until "},
		{"draining", func(b *Backend) bool { return b.SetDraining(true) }, func(b *Backend) bool { return b.SetDraining(false) }, "draining"},
		{"disabled", func(b *Backend) bool { return b.SetDisabled(true) }, func(b *Backend) bool { return b.SetDisabled(false) }, "disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBackend(t)
			if !b.Available() || b.State().Reason() != "" {
				t.Fatalf("a new backend is not available: %q", b.State().Reason())
			}
			if !tt.set(b) {
				t.Error("setting the condition did not report a change")
			}
			if tt.set(b) && tt.name != "ejected" {
				t.Error("setting it again reported a change")
			}
			if b.Available() || b.State().Available() {
				t.Fatal("the backend is available with the condition set")
			}
			if r := b.State().Reason(); len(r) < len(tt.reason) || r[:len(tt.reason)] != tt.reason {
				t.Errorf("Reason() = %q, want it to start with %q", r, tt.reason)
			}
			if !tt.clear(b) {
				t.Error("clearing the condition did not report a change")
			}
			if !b.Available() || !b.State().Available() {
				t.Fatalf("the backend is not available after clearing: %q", b.State().Reason())
			}
		})
	}
}

// TestConditionsAreIndependent is the bug this shape fixes: the health
// checker's next pass must not undo an ejection, a drain or a disable.
func TestConditionsAreIndependent(t *testing.T) {
	b := newTestBackend(t)
	b.SetHealthy(false)
	b.SetDraining(true)
	b.Eject(time.Now().Add(time.Hour))
	b.SetDisabled(true)
	b.SetHealthy(true) // a passing check
	if b.Available() {
		t.Fatal("a passing health check put a drained, ejected, disabled backend back")
	}
	s := b.State()
	if !s.Healthy || !s.Draining || !s.Disabled || s.EjectedUntil.IsZero() {
		t.Fatalf("state after a passing check: %+v", s)
	}
	if want := "ejected until " + s.EjectedUntil.Format(time.TimeOnly) + "; draining; disabled"; s.Reason() != want {
		t.Errorf("Reason() = %q, want %q", s.Reason(), want)
	}
	b.SetDraining(false)
	b.SetDisabled(false)
	if b.Available() {
		t.Fatal("available while still ejected")
	}
	b.Restore()
	if !b.Available() {
		t.Fatal("not available with every condition cleared")
	}
}

// TestEjectionExpiresByItself: nobody has to clear an ejection whose time
// has passed.
func TestEjectionExpiresByItself(t *testing.T) {
	b := newTestBackend(t)
	b.Eject(time.Now().Add(30 * time.Millisecond))
	if b.Available() {
		t.Fatal("available right after an ejection")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !b.Available() {
		if time.Now().After(deadline) {
			t.Fatal("the ejection never ran out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !b.EjectedUntil().IsZero() {
		t.Error("EjectedUntil is set after the ejection ran out")
	}
	// A new ejection after an expired one is a change again.
	if !b.Eject(time.Now().Add(time.Hour)) {
		t.Error("ejecting a backend whose ejection ran out did not report a change")
	}
	if b.Eject(time.Now().Add(2 * time.Hour)) {
		t.Error("extending an ejection reported a change")
	}
	// With another condition set too, the expired ejection no longer
	// counts but the other one does.
	b.Eject(time.Now().Add(-time.Second))
	b.SetDraining(true)
	if b.Available() {
		t.Fatal("available while draining")
	}
}

func TestEffectiveWeight(t *testing.T) {
	b := newTestBackend(t)
	if b.EffectiveWeight() != 3 {
		t.Fatalf("effective weight %d, want the configured 3", b.EffectiveWeight())
	}
	b.SetEffectiveWeight(1)
	if b.EffectiveWeight() != 1 || b.Weight != 3 {
		t.Fatalf("effective %d, configured %d; want 1 and 3", b.EffectiveWeight(), b.Weight)
	}
	b.SetEffectiveWeight(0)
	if b.EffectiveWeight() != 1 {
		t.Fatalf("weight 0 gave %d; want at least 1 (draining is how a backend takes nothing)", b.EffectiveWeight())
	}
}

// TestConditionsConcurrent sets and clears conditions from many goroutines
// while others pick; with -race it checks there is no unguarded state, and
// at the end each condition holds what its last owner set.
func TestConditionsConcurrent(t *testing.T) {
	b := newTestBackend(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for k := range 1000 {
				on := k%2 == 0
				switch i % 4 {
				case 0:
					b.SetHealthy(!on)
				case 1:
					b.SetDraining(on)
				case 2:
					b.SetDisabled(on)
				case 3:
					b.Available()
					b.State()
				}
			}
		})
	}
	wg.Wait()
	// Every setter's last call cleared its condition (k = 999 is odd).
	if !b.Available() {
		t.Fatalf("not available after every owner cleared its condition: %q", b.State().Reason())
	}
}

func TestAvailableAllocatesNothing(t *testing.T) {
	b := newTestBackend(t)
	if n := testing.AllocsPerRun(100, func() { b.Available() }); n != 0 {
		t.Errorf("Available allocates %.0f times", n)
	}
	b.Eject(time.Now().Add(time.Hour))
	if n := testing.AllocsPerRun(100, func() { b.Available() }); n != 0 {
		t.Errorf("Available on an ejected backend allocates %.0f times", n)
	}
}

// A request the picker chose while the breaker was half-open, admitted
// after the probe failed and the breaker opened again, is refused rather
// than let through as an ordinary request.
func TestAdmitRefusesABreakerThatOpenedAgain(t *testing.T) {
	b := newTestBackend(t)
	b.Eject(time.Now().Add(-time.Millisecond)) // half-open
	if ok, probe, _ := b.Admit(0, true); !ok || !probe {
		t.Fatalf("half-open: ok %v probe %v, want the probe", ok, probe)
	}
	b.Release()
	b.Eject(time.Now().Add(time.Minute)) // the probe failed: open again
	b.EndProbe()
	if ok, probe, full := b.Admit(0, true); ok || probe || full {
		t.Errorf("open again: ok %v probe %v full %v, want a refusal", ok, probe, full)
	}
	if ok, _, _ := b.Admit(0, false); !ok {
		t.Error("in panic (no gate) an ejected backend takes requests")
	}
}
