package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestReloadLineSaysWhatChanged: the line a reload logs names the
// backends added and removed, each changed one with what changed, and
// the settings whose values changed; with processes: 2 the control logs
// it once, not each process.
func TestReloadLineSaysWhatChanged(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 4)
		head := fmt.Sprintf("listen: 127.0.0.1:0\nprocesses: %d\naccess_log: false\n", processes)
		file := writeFile(t, t.TempDir(), "relay.yml", head+backendsYAML(urlsOf(bs[:3])))
		r, _ := startRelay(t, "", "-config", file)

		next := head + "retries: 1\nalgorithm: weighted-round-robin\nbackends:\n" +
			"  - url: " + bs[0].url + "\n    weight: 3\n    max_requests: 10\n" +
			"  - url: " + bs[1].url + "\n" +
			"  - url: " + bs[3].url + "\n"
		if err := writeFileAtomic(file, next); err != nil {
			t.Fatal(err)
		}
		r.signal(syscall.SIGHUP)
		line := waitReload(t, r, 2)
		for key, want := range map[string][]string{
			"added":    {bs[3].url},
			"removed":  {bs[2].url},
			"changed":  {bs[0].url + " weight 1->3, max_requests 0->10"},
			"settings": {"algorithm", "retries"},
		} {
			if got := strs(line[key]); !slices.Equal(got, want) {
				t.Errorf("reload line %s: %q, want %q\nline: %v", key, got, want, line)
			}
		}

		// A reload that changes nothing says so with empty lists; by
		// the time it is logged, any second line of the first reload
		// would have been too.
		r.signal(syscall.SIGHUP)
		line = waitReload(t, r, 3)
		for _, key := range []string{"added", "removed", "changed", "settings"} {
			if got, ok := line[key].([]any); !ok || len(got) != 0 {
				t.Errorf("reload line without changes: %s is %v, want []", key, line[key])
			}
		}
		n := 0
		for _, l := range r.logs() {
			if l.Msg() == "configuration reloaded" && l.Num("generation") == 2 {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d reload lines for one reload, want 1", n)
		}
		r.stop()
	})
}

// strs is a JSON list of strings.
func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// TestReloadLineBounded: a list on the reload line names at most
// maxNamed entries, then how many more there are.
func TestReloadLineBounded(t *testing.T) {
	var names []string
	for i := range 13 {
		names = append(names, fmt.Sprintf("http://127.0.0.1:%d", 9000+i))
	}
	got := bounded(names)
	if len(got) != maxNamed+1 || got[maxNamed] != "and 3 more" || got[0] != names[0] {
		t.Errorf("bounded(13 names) = %v, want the first %d and \"and 3 more\"", got, maxNamed)
	}
	if got := bounded(nil); got == nil || len(got) != 0 {
		t.Errorf("bounded(nil) = %#v, want an empty list", got)
	}
	if got := bounded(names[:2]); strings.Join(got, " ") != names[0]+" "+names[1] {
		t.Errorf("bounded(2 names) = %v", got)
	}
}
