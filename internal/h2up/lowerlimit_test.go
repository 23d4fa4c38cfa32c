package h2up

import (
	"testing"

	"golang.org/x/net/http2"
)

// TestLoweredStreamLimitHoldsForStreamsOpenedBefore opens a stream, then
// has the backend lower SETTINGS_MAX_CONCURRENT_STREAMS from 2 to 1 with
// one stream already open: once relay has acknowledged the new limit, the
// stream it opened before must not send its head, which would take the
// backend over the limit it acknowledged (RFC 9113 5.1.2). It fails with
// ErrOverLimit, an ErrRefused, and nothing goes out for it.
func TestLoweredStreamLimitHoldsForStreamsOpenedBefore(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 2})
	s1 := c.Open()
	if err := s1.WriteHead(get("/one"), true); err != nil {
		t.Fatal(err)
	}
	f.until("the first request", isHeaders)
	s2 := c.Open()
	if s2 == nil {
		t.Fatal("no room for a second stream at a limit of 2")
	}
	f.write(func() { f.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1}) })
	f.until("relay's ACK of the lower limit", func(fr http2.Frame) bool {
		s, ok := fr.(*http2.SettingsFrame)
		return ok && s.IsAck()
	})
	err := s2.WriteHead(get("/two"), true)
	if !isErr(err, ErrOverLimit) || !isErr(err, ErrRefused) {
		t.Errorf("head over the lowered limit: %v, want ErrOverLimit (an ErrRefused)", err)
	}
	s2.Close()
	if s := c.Open(); s != nil {
		t.Error("a stream opened with one open at a limit of 1")
		s.Close()
	}
	// Nothing went out for the second stream: the next frame relay sends
	// is the answer to this PING.
	f.write(func() { f.fr.WritePing(false, [8]byte{7}) })
	fr := f.until("relay's PING ACK", func(fr http2.Frame) bool {
		if isHeaders(fr) {
			return true
		}
		p, ok := fr.(*http2.PingFrame)
		return ok && p.IsAck()
	})
	if isHeaders(fr) {
		t.Errorf("relay sent a request head on stream %d over the lowered limit", fr.Header().StreamID)
	}
	s1.Close()
	if s := c.Open(); s == nil {
		t.Error("no room once the first stream closed")
	} else {
		s.Close()
	}
}
