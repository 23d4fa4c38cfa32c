package handler

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"relay/internal/core"
)

// A client that sends its body as fast as relay takes it is not timed out
// because the backend is slow to take the body: the body's deadline
// bounds a read waiting for the client, on both protocols, not the time
// between reads.
func TestABackendSlowToTakeTheBodyDoesNotTimeOutTheClient(t *testing.T) {
	be := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond) // three times the body idle time
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	})
	front := startFrontTimed(t, core.BodyTime{Idle: 500 * time.Millisecond}, be)
	const size = 32 << 20
	body := bytes.Repeat([]byte("x"), size)
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			resp, err := cl.Post(front+"/up", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(got) != strconv.Itoa(size) {
				t.Errorf("status %d, body %.60q; want 200 and %d", resp.StatusCode, got, size)
			}
		})
	}
}
