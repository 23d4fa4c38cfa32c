package logging

import (
	"errors"
	"os"
	"path/filepath"
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
