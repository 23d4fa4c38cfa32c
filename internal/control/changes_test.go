package control

import (
	"fmt"
	"log/slog"
	"testing"

	"relay/internal/supervisor"
)

// TestReloadedReportsItsChanges: a reload returns the members it added
// and removed (an operator's among them) and those whose weight or
// request cap it changed, before and after; a member that stays as it
// was is not named.
func TestReloadedReportsItsChanges(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8005"), 100, slog.New(slog.DiscardHandler))
	if _, err := l.Add("default", "http://127.0.0.1:8003", 1); err != nil {
		t.Fatal(err)
	}
	ch, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), []supervisor.Member{
		{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 3, MaxRequests: 10},
		{Pool: "default", URL: "http://127.0.0.1:8005", Weight: 1},
		{Pool: "default", URL: "http://127.0.0.1:8004", Weight: 2},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	urls := func(ms []supervisor.Member) string {
		var s string
		for _, m := range ms {
			s += m.URL[len(m.URL)-4:] + " "
		}
		return s
	}
	if got := urls(ch.Added); got != "8004 " {
		t.Errorf("added %q, want 8004", got)
	}
	if got := urls(ch.Removed); got != "8002 8003 " {
		t.Errorf("removed %q, want 8002 and the operator's 8003", got)
	}
	if got := fmt.Sprint(ch.Changed); got != "[{{default http://127.0.0.1:8001 1 0  } {default http://127.0.0.1:8001 3 10  }}]" {
		t.Errorf("changed %s, want 8001 from weight 1 and no cap to weight 3 and 10", got)
	}

	// Refused: nothing changed, nothing reported.
	ch, err = l.Reloaded(supervisor.ConfigSource{Generation: 3}, defaultPool(100), []supervisor.Member{{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 1}, {Pool: "default", URL: "::bad", Weight: 1}}, nil, nil)
	if err == nil || len(ch.Added)+len(ch.Removed)+len(ch.Changed) > 0 {
		t.Errorf("a refused reload: %v, changes %+v; want an error and no changes", err, ch)
	}
}
