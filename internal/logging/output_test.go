package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logFiles returns the contents of every file in dir by name.
func logFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

func TestOpenStdout(t *testing.T) {
	o, err := Open("", 1, 1, 1)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if o.w != os.Stdout {
		t.Fatalf("Open(\"\") writes to %v, want os.Stdout", o.w)
	}
	if err := o.Rotate(); err != nil {
		t.Errorf("Rotate on stdout: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("Close on stdout: %v", err)
	}
	// Stdout must still be usable by the rest of the process.
	if _, err := os.Stdout.Stat(); err != nil {
		t.Errorf("stdout after Close: %v", err)
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		file    string
		size    int
		wantErr string
	}{
		{"missing directory", filepath.Join(dir, "nope", "lb.log"), 1, "no such file or directory"},
		{"path is a directory", dir, 1, "is a directory"},
		{"file under a file", filepath.Join(dir, "plain", "lb.log"), 1, "not a directory"},
		{"negative size", filepath.Join(dir, "lb.log"), -1, "must not be negative"},
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Open(tt.file, tt.size, 0, 0)
			if err == nil {
				o.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tt.file)
			}
			if !strings.Contains(err.Error(), tt.file) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q should name %q and say %q", err, tt.file, tt.wantErr)
			}
		})
	}
}

func TestOpenCreatesFileAtOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lb.log")
	o, err := Open(file, 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer o.Close()
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("log file not created by Open: %v", err)
	}
}

func TestOpenAppendsToExistingFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lb.log")
	if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := Open(file, 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := o.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "old\nnew\n" {
		t.Fatalf("file holds %q, want old then new", b)
	}
}

func TestOutputRotate(t *testing.T) {
	dir := t.TempDir()
	o, err := Open(filepath.Join(dir, "lb.log"), 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := o.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Rotate(); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if _, err := o.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	files := logFiles(t, dir)
	if len(files) != 2 || files["lb.log"] != "after\n" {
		t.Fatalf("files after Rotate: %q, want lb.log holding after and one backup", files)
	}
	for name, body := range files {
		if name != "lb.log" && (!strings.HasPrefix(name, "lb-") || !strings.HasSuffix(name, ".log") || body != "before\n") {
			t.Errorf("backup %s holds %q, want lb-<time>.log holding before", name, body)
		}
	}
}

// TestOutputRotateAfterRename is the logrotate pattern: the file is renamed
// away, then SIGHUP makes relay start a new one under the configured name.
func TestOutputRotateAfterRename(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lb.log")
	o, err := Open(file, 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer o.Close()
	if _, err := o.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	if err := o.Rotate(); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if _, err := o.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	files := logFiles(t, dir)
	if len(files) != 2 || files["lb.log"] != "two\n" || files["lb.log.1"] != "one\n" {
		t.Fatalf("files: %q, want lb.log.1 holding one and lb.log holding two", files)
	}
}

func TestOutputRotatesBySize(t *testing.T) {
	dir := t.TempDir()
	o, err := Open(filepath.Join(dir, "lb.log"), 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	const lines = 1024 + 8 // just over the 1 MB limit
	for range lines {
		if _, err := o.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	files := logFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("got files %v, want lb.log and one backup", len(files))
	}
	total := 0
	for name, body := range files {
		if len(body) > 1<<20 {
			t.Errorf("%s holds %d bytes, over the 1 MB limit", name, len(body))
		}
		total += len(body)
	}
	if total != lines*len(line) {
		t.Errorf("files hold %d bytes in all, want %d", total, lines*len(line))
	}
}

// TestSharedOutput has the process log and the access log write to one
// rotating file at once, rotating in between: every line must survive whole.
func TestSharedOutput(t *testing.T) {
	dir := t.TempDir()
	o, err := Open(filepath.Join(dir, "lb.log"), 1, 0, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	logger := NewLogger(o, slog.LevelInfo)
	access := NewAccessLog(o, WithFlushSize(2048), WithFlushInterval(time.Millisecond))
	const n = 500
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			access.Log(testEntry(i))
		}
	})
	wg.Go(func() {
		for i := range n {
			logger.Info("backend down", "backend", "http://127.0.0.1:8002", "i", i)
			if i == n/2 {
				if err := o.Rotate(); err != nil {
					t.Errorf("Rotate: %v", err)
				}
			}
		}
	})
	wg.Wait()
	if err := access.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for name, body := range logFiles(t, dir) {
		for l := range strings.Lines(body) {
			var rec struct{ Msg string }
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("%s: broken line %q: %v", name, l, err)
			}
			counts[rec.Msg]++
		}
	}
	if counts["access"] != n || counts["backend down"] != n {
		t.Fatalf("line counts %v, want %d of each", counts, n)
	}
}
