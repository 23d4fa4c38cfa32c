package control

import (
	"relay/internal/testlog"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/supervisor"
)

// logCount counts the lines of the control's log that hold msg.
func logCount(logs *testlog.Buffer, msg string) int { return logs.Count(msg) }

// Two processes open the breakers of two different backends at the same
// moment, each within max_ejected_percent (50) on its own: together they
// would hold out both backends of two. The supervisor keeps the first and
// refuses the second, both processes end with the same one backend
// ejected, and each change is logged once.
func TestCrossingBreakerOpeningsEndTheSameInEveryProcess(t *testing.T) {
	for round := range 20 {
		checked := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
		log, logs := testlog.New()
		l := NewControl(supervisor.ConfigSource{Generation: 1}, checked, 50, log)
		procs := []*supervisor.Process{attachProcess(t, l, 0), attachProcess(t, l, 1)}
		own := make([][]*backend.Backend, 2)
		for i, p := range procs {
			own[i] = newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
			if err := follow(p, own[i], Updates{}); err != nil {
				t.Fatal(err)
			}
		}
		// Process i trips backend i: locally, then it reports.
		until := time.Now().Add(time.Minute)
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() {
				b := own[i][i]
				b.Trip()
				b.Eject(until)
				ReportBreaker(p, "default")(b, until, "3 failures in a row")
			})
		}
		wg.Wait()
		agree := func() bool {
			for j := range 2 {
				if own[0][j].Ejected() != own[1][j].Ejected() || own[0][j].Ejected() != checked[j].Ejected() {
					return false
				}
			}
			return logCount(logs, "circuit breaker not opened") == 1
		}
		waitFor(t, "both processes following the supervisor's verdicts", agree)
		out := 0
		for _, b := range checked {
			if b.Ejected() {
				out++
			}
		}
		if out != 1 {
			t.Fatalf("round %d: %d of 2 backends ejected, want 1 (max_ejected_percent 50)", round, out)
		}
		if n := logCount(logs, "circuit breaker opened"); n != 1 {
			t.Fatalf("round %d: %d \"opened\" lines, want 1; logs:\n%s", round, n, logs)
		}
	}
}

// Two processes open the same backend's breaker at once: it opens once,
// with one log line, and stays open in both.
func TestTheSameBreakerOpenedTwiceIsLoggedOnce(t *testing.T) {
	checked := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003")
	log, logs := testlog.New()
	l := NewControl(supervisor.ConfigSource{Generation: 1}, checked, 50, log)
	procs := []*supervisor.Process{attachProcess(t, l, 0), attachProcess(t, l, 1)}
	own := make([][]*backend.Backend, 2)
	for i, p := range procs {
		own[i] = newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003")
		if err := follow(p, own[i], Updates{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		until := time.Now().Add(time.Minute + time.Duration(i)*time.Millisecond)
		own[i][0].Trip()
		own[i][0].Eject(until)
		ReportBreaker(p, "default")(own[i][0], until, "3 failures in a row")
	}
	waitFor(t, "the supervisor taking in both", func() bool { return checked[0].Ejected() })
	time.Sleep(50 * time.Millisecond)
	if n := logCount(logs, "circuit breaker opened"); n != 1 {
		t.Errorf("%d \"opened\" lines, want 1; logs:\n%s", n, logs)
	}
	if !own[0][0].Ejected() || !own[1][0].Ejected() {
		t.Error("the breaker is not open in both processes")
	}
	// One process's probe succeeds: closed everywhere, logged once.
	own[1][0].Close()
	ReportBreaker(procs[1], "default")(own[1][0], time.Time{}, "probe request succeeded")
	waitFor(t, "the breaker closing everywhere", func() bool {
		return !checked[0].Ejected() && !own[0][0].Ejected() && !own[1][0].Ejected()
	})
	if n := logCount(logs, "circuit breaker closed"); n != 1 {
		t.Errorf("%d \"closed\" lines, want 1; logs:\n%s", n, logs)
	}
}

// A process that starts while a breaker is half-open (its open time over,
// no probe verdict yet) gets it half-open: it sends the probe and reports
// the outcome, so the supervisor does not count the backend as ejected for
// good.
func TestProcessStartedLaterProbesAHalfOpenBreaker(t *testing.T) {
	checked := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003", "http://127.0.0.1:8004")
	checked[0].Trip()
	checked[0].Eject(time.Now().Add(-time.Second)) // opened, its time over
	log, logs := testlog.New()
	l := NewControl(supervisor.ConfigSource{Generation: 1}, checked, 25, log)
	p := attachProcess(t, l, 0)
	own := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003", "http://127.0.0.1:8004")
	if err := follow(p, own, Updates{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the half-open breaker reaching the new process", own[0].Ejected)
	if ok, probe, _ := own[0].Admit(0, true); !ok || !probe {
		t.Fatalf("the new process's first request to the half-open backend: ok %v probe %v, want the probe", ok, probe)
	}
	// The probe succeeds: closed in the supervisor, and another backend's
	// breaker may open within max_ejected_percent (1 of 4).
	own[0].Release()
	own[0].Close()
	own[0].EndProbe()
	ReportBreaker(p, "default")(own[0], time.Time{}, "probe request succeeded")
	waitFor(t, "the supervisor closing it", func() bool { return !checked[0].Ejected() })
	until := time.Now().Add(time.Minute)
	own[1].Eject(until)
	ReportBreaker(p, "default")(own[1], until, "5 failures in a row")
	waitFor(t, "the next opening accepted", checked[1].Ejected)
	if n := logCount(logs, "not opened"); n != 0 {
		t.Errorf("%d refused openings, want none", n)
	}
}
