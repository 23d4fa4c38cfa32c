package logging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestAppenderStaysClosed: a Reopen that arrives after Close (a rotation
// announced while the process stops) opens nothing, and writes after
// Close fail: the appender holds no file once closed.
func TestAppenderStaysClosed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lb.log")
	a, err := OpenAppend(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file, file+".1"); err != nil { // rotated away
		t.Fatal(err)
	}
	if err := a.Reopen(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Reopen after Close: %v, want os.ErrClosed", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reopen after Close opened the path again: %v", err)
	}
	if _, err := a.Write([]byte("after close\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v, want os.ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a second Close: %v, want os.ErrClosed", err)
	}
	if b, _ := os.ReadFile(file + ".1"); string(b) != "before\n" {
		t.Errorf("the file holds %q, want only what came before Close", b)
	}
}

// TestSharedRotationsLoseNoLine: the supervisor rotates the shared file
// back to back, by size and on SIGUSR1 at once, while it writes and a
// process appends, reopening the path after each rotation as late as it
// comes. Every line written is in exactly one of the files: a rotation
// neither truncates a file a process created by reopening early nor
// replaces the backup of the rotation before.
func TestSharedRotationsLoseNoLine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lb.log")
	s, err := OpenShared(file, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := OpenAppend(file)
	if err != nil {
		t.Fatal(err)
	}
	const rotators, rotations = 2, 100
	reopen := make(chan struct{}, rotators*rotations)
	var rotating, writing sync.WaitGroup
	for range rotators {
		rotating.Go(func() {
			for range rotations {
				if err := s.Rotate(); err != nil {
					t.Error(err)
				}
				reopen <- struct{}{}
			}
		})
	}
	done := make(chan struct{})
	var written [2]int
	for w, a := range []*Appender{s.Appender, proc} {
		writing.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-reopen:
					if a == proc {
						if err := proc.Reopen(); err != nil {
							t.Error(err)
						}
					}
				default:
				}
				if _, err := fmt.Fprintf(a, "%d %d\n", w, written[w]); err != nil {
					t.Error(err)
					return
				}
				written[w]++
			}
		})
	}
	rotating.Wait()
	close(done)
	writing.Wait()
	proc.Close()
	s.Close()

	seen := [2]map[int]bool{{}, {}}
	files := logFiles(t, dir)
	for name, body := range files {
		for l := range strings.Lines(body) {
			var w, n int
			if _, err := fmt.Sscanf(l, "%d %d\n", &w, &n); err != nil || w < 0 || w > 1 {
				t.Fatalf("%s: broken line %q", name, l)
			}
			if seen[w][n] {
				t.Fatalf("line %q is in the files twice", l)
			}
			seen[w][n] = true
		}
	}
	for w := range written {
		if len(seen[w]) != written[w] {
			t.Errorf("writer %d wrote %d lines; %d of them are in the %d files", w, written[w], len(seen[w]), len(files))
		}
	}
}

// TestSharedRotationPrunes: rotated files are named as Open's rotation
// names them and kept up to log_max_backups, the newest ones.
func TestSharedRotationPrunes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lb.log")
	s, err := OpenShared(file, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if _, err := fmt.Fprintf(s, "%d\n", i); err != nil {
			t.Fatal(err)
		}
		if err := s.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
	files := logFiles(t, dir)
	var kept []string
	for name, body := range files {
		if name == "lb.log" {
			continue
		}
		if !strings.HasPrefix(name, "lb-") || !strings.HasSuffix(name, ".log") {
			t.Errorf("rotated file %s is not named lb-<time>.log", name)
		}
		kept = append(kept, strings.TrimSpace(body))
	}
	if len(files) != 3 || files["lb.log"] != "" || !(strings.Join(kept, ",") == "3,4" || strings.Join(kept, ",") == "4,3") {
		t.Fatalf("files after 5 rotations keeping 2: %q; want lb.log empty and the backups of lines 3 and 4", files)
	}
}

// TestSharedRotateAfterClose moves nothing: the file stays where it is.
func TestSharedRotateAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenShared(filepath.Join(dir, "lb.log"), 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Rotate(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Rotate after Close: %v, want os.ErrClosed", err)
	}
	if files := logFiles(t, dir); len(files) != 1 {
		t.Errorf("files after a rotation after Close: %q, want lb.log alone", files)
	}
}
