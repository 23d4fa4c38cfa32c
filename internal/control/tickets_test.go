package control

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relay/internal/supervisor"
	"relay/internal/testsock"
)

// A rotation sends every process a new session-ticket key in front of the
// ones before it, keeps three, and a process attached later gets the
// current set with its configuration.
func TestRotatedTicketKeysReachEveryProcess(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	p := attachProcess(t, l, 0)
	first := p.Config.TicketKeys
	got := make(chan [][]byte, 8)
	if err := follow(p, newBackends(t, "http://127.0.0.1:8001"), Updates{Tickets: func(k [][]byte) { got <- k }}); err != nil {
		t.Fatal(err)
	}
	rotate := func() [][]byte {
		t.Helper()
		l.RotateTickets()
		select {
		case k := <-got:
			return k
		case <-time.After(ioTimeout):
			t.Fatal("a rotation never reached the process")
			return nil
		}
	}
	rotate()
	keys := rotate()
	// Two rotations: the first key still decrypts, behind two new ones.
	if len(keys) != keptTicketKeys || !bytes.Equal(keys[2], first[0]) {
		t.Fatalf("after two rotations the process has %d keys, the oldest the first: %v; want %d, true",
			len(keys), len(keys) == keptTicketKeys && bytes.Equal(keys[2], first[0]), keptTicketKeys)
	}
	for i := range keys {
		for j := range i {
			if len(keys[i]) != supervisor.TicketKeyLen || bytes.Equal(keys[i], keys[j]) {
				t.Fatalf("keys %d and %d: %d bytes, equal %v", j, i, len(keys[i]), bytes.Equal(keys[i], keys[j]))
			}
		}
	}
	// A third: the first key is forgotten.
	keys = rotate()
	for _, k := range keys {
		if bytes.Equal(k, first[0]) {
			t.Fatal("after three rotations the first key still decrypts")
		}
	}
	late := attachProcess(t, l, 1)
	if k := late.Config.TicketKeys; len(k) != keptTicketKeys || !bytes.Equal(k[0], keys[0]) {
		t.Errorf("a process attached later got %d keys, the newest first: %v; want %d, true", len(k), len(k) > 0 && bytes.Equal(k[0], keys[0]), keptTicketKeys)
	}
}

// A broken message that carries a session-ticket key does not show the
// key in its error, which goes to the log; a key of the wrong length is
// refused.
func TestBrokenTicketMessagesKeepTheirKeysOutOfErrors(t *testing.T) {
	const key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes
	a, b := testsock.Pair(t)
	ch := supervisor.NewChannel(b)
	for _, tt := range []struct{ line, errHas string }{
		{`{"kind":"tickets","tickets":["` + key + `"],}` + "\n", "malformed message of"},
		{`{"kind":"config","config":{"generation":1,"ticket_keys":["` + key + `"` + "\n", "malformed message of"},
		{`{"kind":"tickets","tickets":["QUJDREVGR0g="]}` + "\n", "has 8 bytes, want 32"},
	} {
		go a.Write([]byte(tt.line))
		_, err := ch.Recv()
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("Recv of %.40q: %v, want an error saying %q", tt.line, err, tt.errHas)
		}
		if err != nil && (strings.Contains(err.Error(), key[:16]) || strings.Contains(err.Error(), "QUJDREVGR0g")) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
}
