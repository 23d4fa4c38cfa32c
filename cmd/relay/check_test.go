package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckAcceptsValidFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, summary string
	}{
		{name: "original description", path: "../../examples/original.yml", summary: "ok (3 backends, weighted-round-robin)"},
		{name: "documented example", path: "../../examples/config.yml", summary: "ok (3 backends, round-robin)"},
		{name: "backends only", path: writeFile(t, t.TempDir(), "min.yml", "backends:\n  - http://127.0.0.1:9\n"),
			summary: "ok (1 backends, round-robin)"},
		{name: "sticky indirect and nocache", path: writeFile(t, t.TempDir(), "sticky.yml",
			"backends:\n  - http://127.0.0.1:9\nsticky:\n  cookie: SRV\n  indirect: true\n  nocache: true\n"),
			summary: "ok (1 backends, round-robin)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, err := filepath.Abs(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runRelay(t, "-check", "-config", path)
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
			}
			if want := path + ": " + tt.summary; strings.TrimSpace(stdout) != want {
				t.Errorf("stdout %q, want %q", stdout, want)
			}
			if strings.TrimSpace(stderr) != "" {
				t.Errorf("stderr not empty:\n%s", stderr)
			}
		})
	}
}

// checkProblems runs relay -check on content and returns the problem lines.
func checkProblems(t *testing.T, content string) (path string, problems []string) {
	t.Helper()
	path = writeFile(t, t.TempDir(), "relay.yml", content)
	code, stdout, stderr := runRelay(t, "-check", "-config", path)
	if code == 0 {
		t.Fatalf("exit 0 for an invalid file; stdout:\n%s", stdout)
	}
	if strings.Contains(stdout, "ok") {
		t.Errorf("stdout claims the file is fine:\n%s", stdout)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" {
			problems = append(problems, l)
		}
	}
	return path, problems
}

func TestCheckReportsEachProblem(t *testing.T) {
	t.Parallel()
	const two = "backends:\n  - http://127.0.0.1:8001\n  - http://127.0.0.1:8002\n"
	tests := []struct {
		name    string
		content string
		line    int    // YAML line the problem must name; 0 for none
		want    string // the rest of the line must contain this
	}{
		{name: "unknown key", content: two + "helth_check_interval: 5s\n", line: 4, want: "helth_check_interval: unknown key"},
		{name: "url without scheme", content: "backends:\n  - url: 127.0.0.1:8001\n", line: 2, want: "no scheme"},
		{name: "url without host", content: "backends:\n  - url: http://:8001\n", line: 2, want: "no host"},
		{name: "weight below 1", content: "backends:\n  - url: http://127.0.0.1:8001\n    weight: 0\n", line: 3,
			want: "weight 0 is below 1"},
		{name: "unknown algorithm", content: "algorithm: fastest\n" + two, line: 1, want: `unknown algorithm "fastest"`},
		{name: "duplicate backend", content: "backends:\n  - http://127.0.0.1:8001\n  - url: http://127.0.0.1:8001\n",
			line: 3, want: "duplicates the backend at line 2"},
		{name: "duplicate after normalising", content: "backends:\n  - http://LOCALHOST:8001\n  - http://localhost:8001/\n",
			line: 3, want: "duplicates"},
		{name: "port zero", content: "port: 0\n" + two, line: 1, want: "port: must be between 1 and 65535"},
		{name: "port too large", content: "port: 65536\n" + two, line: 1, want: "port: must be between 1 and 65535"},
		{name: "timeout equal to interval", content: "health_check_interval: 2s\nhealth_check_timeout: 2\n" + two, line: 2,
			want: "must be shorter than health_check_interval"},
		{name: "timeout longer than interval", content: "health_check_interval: 1\nhealth_check_timeout: 1500ms\n" + two,
			line: 2, want: "must be shorter than health_check_interval"},
		{name: "no backends", content: "port: 8080\n", want: "no backends"},
		{name: "empty backends list", content: "port: 8080\nbackends: []\n", want: "no backends"},
		{name: "sticky indirect not a boolean", content: two + "sticky:\n  cookie: SRV\n  indirect: yes\n",
			line: 6, want: `sticky.indirect: must be true or false, got "yes"`},
		{name: "sticky nocache not a boolean", content: two + "pools:\n  a:\n    backends: [http://127.0.0.1:8003]\n    sticky:\n      cookie: A\n      nocache: private\n",
			line: 9, want: `pools.a.sticky.nocache: must be true or false, got "private"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, problems := checkProblems(t, tt.content)
			if len(problems) != 1 {
				t.Fatalf("%d problem lines, want 1:\n%s", len(problems), strings.Join(problems, "\n"))
			}
			prefix := path + ":"
			if tt.line > 0 {
				prefix = fmt.Sprintf("%s:%d:", path, tt.line)
			}
			if !strings.HasPrefix(problems[0], prefix) || !strings.Contains(problems[0], tt.want) {
				t.Errorf("problem %q, want it to start with %q and mention %q", problems[0], prefix, tt.want)
			}
		})
	}
}

func TestCheckReportsAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	content := `port: 70000
algorithm: nope
health_check_interval: 1s
health_check_timeout: 2s
bogus: 1
backends:
  - url: 127.0.0.1:8001
  - url: http://
  - url: http://a:1
    weight: 0
  - url: http://b:1
  - url: http://b:1
`
	want := []struct {
		line int
		text string
	}{
		{1, "port"},
		{2, "unknown algorithm"},
		{4, "health_check_timeout"},
		{5, "bogus: unknown key"},
		{7, "no scheme"},
		{8, "no host"},
		{10, "below 1"},
		{12, "duplicates"},
	}
	path, problems := checkProblems(t, content)
	if len(problems) != len(want) {
		t.Fatalf("%d problem lines, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for i, w := range want {
		prefix := fmt.Sprintf("%s:%d:", path, w.line)
		if !strings.HasPrefix(problems[i], prefix) || !strings.Contains(problems[i], w.text) {
			t.Errorf("problem %d is %q, want it to start with %q and mention %q", i, problems[i], prefix, w.text)
		}
	}
}

func TestRefusesToStartOnBadFile(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	path := writeFile(t, t.TempDir(), "relay.yml",
		"listen: 127.0.0.1:"+port+"\nworkers: many\nbackends:\n  - http://127.0.0.1:8001\n")
	code, stdout, stderr := runRelay(t, "-config", path)
	if code == 0 {
		t.Fatalf("relay started on a bad file; stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, path+":2: workers:") || !strings.Contains(stderr, "refusing to start") {
		t.Errorf("stderr does not name the problem and the refusal:\n%s", stderr)
	}
	if strings.Contains(stdout, "relay started") {
		t.Errorf("relay claims to have started:\n%s", stdout)
	}
}

// relay -check on a file that cannot be read names the file and says
// nothing about starting: it was not asked to start.
func TestCheckOfAMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "absent.yml")
	code, stdout, stderr := runRelay(t, "-check", "-config", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s", code, stdout)
	}
	if !strings.Contains(stderr, path) || strings.Contains(stderr, "refusing to start") {
		t.Errorf("stderr should name %s and not speak of starting:\n%s", path, stderr)
	}
}

// What the file names outside relay is checked by -check and before start:
// a listen host that does not resolve and a log_file relay cannot write.
func TestCheckFindsAnUnusableListenHostAndLogFile(t *testing.T) {
	t.Parallel()
	const one = "backends:\n  - http://127.0.0.1:8001\n"
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		// .invalid never resolves (RFC 6761).
		{"unresolvable listen host", "listen: no-such-host.invalid:8080\n" + one, `:1: listen: host "no-such-host.invalid" does not resolve`},
		{"log_file in a missing directory", "log_file: " + filepath.Join(dir, "nope", "relay.log") + "\n" + one, ":1: log_file: cannot write"},
		{"log_file is a directory", "log_file: " + dir + "\n" + one, "it is a directory"},
		{"access_log_file in a missing directory", "access_log_file: " + filepath.Join(dir, "nope", "access.log") + "\n" + one, ":1: access_log_file: cannot write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, problems := checkProblems(t, tt.content)
			if len(problems) != 1 || !strings.Contains(problems[0], tt.want) {
				t.Errorf("problems %q, want one mentioning %q", problems, tt.want)
			}
		})
	}

	t.Run("a good log_file passes and is not created", func(t *testing.T) {
		t.Parallel()
		logFile := filepath.Join(t.TempDir(), "relay.log")
		path := writeFile(t, t.TempDir(), "relay.yml", "listen: localhost:8080\nlog_file: "+logFile+"\n"+one)
		if code, _, stderr := runRelay(t, "-check", "-config", path); code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		if _, err := os.Stat(logFile); !os.IsNotExist(err) {
			t.Errorf("-check left %s behind (%v)", logFile, err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(logFile)); len(ents) != 0 {
			t.Errorf("-check left %d files in the log directory", len(ents))
		}
	})

	t.Run("start refuses an unwritable log_file", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, t.TempDir(), "relay.yml", "listen: 127.0.0.1:"+freePort(t)+"\nlog_file: "+
			filepath.Join(dir, "missing", "relay.log")+"\n"+one)
		code, stdout, stderr := runRelay(t, "-config", path)
		if code == 0 || !strings.Contains(stderr, path+":2: log_file: cannot write") || !strings.Contains(stderr, "refusing to start") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
		if strings.Contains(stdout, "relay started") {
			t.Errorf("relay claims to have started:\n%s", stdout)
		}
	})
}
