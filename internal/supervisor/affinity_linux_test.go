package supervisor

import (
	"strings"
	"testing"
)

// TestOnCPUStartsUnboundWhenTheCPUIsGone checks that a CPU relay may no
// longer use does not keep a process from starting: it starts unbound, and
// the binding error says why.
func TestOnCPUStartsUnboundWhenTheCPUIsGone(t *testing.T) {
	before, err := threadAffinity()
	if err != nil {
		t.Fatal(err)
	}
	started := false
	bindErr, err := OnCPU(1023, func() error { started = true; return nil })
	if err != nil || !started {
		t.Fatalf("start ran: %v, err %v; want it run without error", started, err)
	}
	if bindErr == nil || !strings.Contains(bindErr.Error(), "binding to CPU 1023") {
		t.Errorf("bindErr %v, want one naming CPU 1023", bindErr)
	}
	after, err := threadAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Error("the calling thread's binding changed")
	}
}
