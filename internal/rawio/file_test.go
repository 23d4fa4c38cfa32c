package rawio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestFileAppendsWhatItIsGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewFile(f)
	var want bytes.Buffer
	// longest is the longest a write took as the test saw it: on a busy
	// machine a thread may be kept off its core in the middle of one,
	// and then the write did take long.
	var longest time.Duration
	for i := range 100 {
		line := bytes.Repeat([]byte{'a' + byte(i%26)}, 1000+i)
		line = append(line, '\n')
		want.Write(line)
		start := time.Now()
		n, err := w.Write(line)
		longest = max(longest, time.Since(start))
		if n != len(line) || err != nil {
			t.Fatalf("write %d = %d, %v; want %d, nil", i, n, err, len(line))
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the file holds %d bytes, not the %d written", len(got), want.Len())
	}
	if w.slow() && longest < SlowWrite {
		t.Errorf("writes into the page cache, the longest %v, were taken for slow ones", longest)
	}
}

// A pipe whose reader lags fills up: the write waits in the poller for
// room, delivers every byte in order, and, having taken long, sends the
// following writes through the scheduler for a while.
func TestFileWaitsForRoomAndBacksOffAfterASlowWrite(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	w := NewFile(pw)
	if w.rc == nil {
		t.Fatal("a pipe offers no RawConn")
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, far over a pipe's buffer
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // the writer meets a full pipe
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if n, err := w.Write(payload); n != len(payload) || err != nil {
		t.Fatalf("write = %d, %v; want %d, nil", n, err, len(payload))
	}
	if !w.slow() {
		t.Errorf("a write that waited 20 ms did not count as slow")
	}
	// The next write goes through os.File and still arrives.
	if _, err := w.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	select {
	case b := <-got:
		if want := append(payload, "tail"...); !bytes.Equal(b, want) {
			t.Fatalf("the reader got %d bytes, want %d in order", len(b), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never got the bytes")
	}
}

func TestFileWriteErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = NewFile(ro).Write([]byte("x\n"))
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Err != syscall.EBADF || pe.Path != path {
		t.Errorf("write to a read-only file: %v; want a PathError naming it with EBADF", err)
	}

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := NewFile(f)
	f.Close()
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after close: %v; want os.ErrClosed", err)
	}
}
