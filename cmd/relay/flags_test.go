package main

import (
	"strings"
	"testing"
)

// allFlags is every flag relay documents.
var allFlags = []string{"-admin-listen", "-algorithm", "-backends", "-check", "-config", "-demo", "-listen", "-port", "-strategy"}

func TestFlagsWithoutFile(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	port := freePort(t)
	r, started := startRelay(t, "", "-backends", strings.Join(urlsOf(bs), ","), "-port", port, "-strategy", "round-robin")
	if !strings.HasSuffix(started.Str("listen"), ":"+port) || started.Num("backends") != 3 {
		t.Fatalf("started line %v, want listen on port %s with 3 backends", started, port)
	}
	got := sequence(t, newClient(t), r, 9)
	assertCycle(t, got, bs)
	r.stop()
}

func TestAlgorithmFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, flag, value string
	}{
		{name: "strategy", flag: "-strategy", value: "random"},
		{name: "algorithm alias", flag: "-algorithm", value: "least-conn"},
		{name: "algorithm takes an algorithm alias", flag: "-algorithm", value: "roundrobin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, nil)
			r, started := startRelay(t, "", "-backends", b.url, "-listen", "127.0.0.1:0", tt.flag, tt.value)
			if got := started.Str("algorithm"); got != tt.value {
				t.Errorf("relay runs %q, want %q", got, tt.value)
			}
			if code, body := get(t, newClient(t), r.url("/")); code != 200 || body != b.hello {
				t.Errorf("GET / = %d %q, want 200 %q", code, body, b.hello)
			}
			r.stop()
		})
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	path := writeConfig(t, "algorithm: round-robin\n"+backendsYAML(urlsOf(bs[:2])))
	r, started := startRelay(t, "", "-config", path, "-backends", bs[2].url, "-strategy", "random")
	if started.Num("backends") != 1 || started.Str("algorithm") != "random" {
		t.Fatalf("started line %v, want 1 backend and random", started)
	}
	for i, body := range sequence(t, newClient(t), r, 10) {
		if body != bs[2].hello {
			t.Fatalf("request %d answered by %q, want only the -backends one %q", i, body, bs[2].hello)
		}
	}
	r.stop()
}

func TestBadFlagValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string // lines of stderr must include these
	}{
		{name: "unknown strategy", args: []string{"-backends", "http://127.0.0.1:8001", "-strategy", "nope"},
			want: []string{`flags: -algorithm: unknown algorithm "nope"`}},
		{name: "port out of range", args: []string{"-backends", "http://127.0.0.1:8001", "-port", "70000"},
			want: []string{"flags: -port: must be between 1 and 65535"}},
		{name: "backend without scheme", args: []string{"-backends", "127.0.0.1:8001"}, want: []string{"no scheme"}},
		{name: "no backends at all", args: nil, want: []string{"no backends"}},
		{name: "flags and file together", args: []string{"-config",
			writeFile(t, t.TempDir(), "r.yml", "bogus: 1\nbackends: [http://127.0.0.1:8001]\n"), "-port", "99999"},
			want: []string{"r.yml:1: bogus: unknown key", "flags: -port:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, check := range []bool{true, false} {
				args := tt.args
				if check {
					args = append([]string{"-check"}, args...)
				}
				code, stdout, stderr := runRelay(t, args...)
				if code != 1 {
					t.Errorf("relay %v: exit %d, want 1; stdout:\n%s", args, code, stdout)
				}
				for _, w := range tt.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("relay %v: stderr does not mention %q:\n%s", args, w, stderr)
					}
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "help", args: []string{"-h"}, wantCode: 0},
		{name: "long help", args: []string{"--help"}, wantCode: 0},
		{name: "unknown flag", args: []string{"-bogus"}, wantCode: 2, wantErr: "-bogus"},
		{name: "flag without value", args: []string{"-port"}, wantCode: 2, wantErr: "-port"},
		{name: "bad port number", args: []string{"-port", "eighty"}, wantCode: 2, wantErr: "-port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runRelay(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d", code, tt.wantCode)
			}
			if strings.Contains(stdout, "relay started") {
				t.Errorf("relay started:\n%s", stdout)
			}
			if !strings.Contains(stderr, "Usage: relay") {
				t.Fatalf("no usage on stderr:\n%s", stderr)
			}
			for _, f := range allFlags {
				if !strings.Contains(stderr, "  "+f+" ") && !strings.Contains(stderr, "  "+f+"\n") {
					t.Errorf("usage does not list %s:\n%s", f, stderr)
				}
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr does not mention %q", tt.wantErr)
			}
		})
	}
}

func TestUnexpectedArgument(t *testing.T) {
	t.Parallel()
	code, _, stderr := runRelay(t, "-check", "config.yml")
	if code != 2 || !strings.Contains(stderr, `unexpected argument "config.yml"`) {
		t.Errorf("exit %d, stderr %q; want 2 naming the stray argument", code, stderr)
	}
}
