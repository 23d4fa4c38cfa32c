package h2

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/core"
)

// limitBackend is an h2c backend, frame by frame, that holds every
// answer until release is closed, lowers its
// SETTINGS_MAX_CONCURRENT_STREAMS on a connection to 1 once lowerAt
// streams are open on it, and advertises 1 on connections after that. A
// stream over its limit is refused (REFUSED_STREAM) and counted as a
// violation once relay has acknowledged the lower limit.
type limitBackend struct {
	lowerAt    int
	release    chan struct{}
	lowered    chan struct{} // closed once relay acknowledged the lower limit
	lowerOnce  sync.Once
	limit      atomic.Int64
	heads      atomic.Int64 // request heads taken
	violations atomic.Int64
	mu         sync.Mutex
	msgs       []string
}

func (b *limitBackend) note(format string, args ...any) {
	b.mu.Lock()
	if len(b.msgs) < 5 {
		b.msgs = append(b.msgs, fmt.Sprintf(format, args...))
	}
	b.mu.Unlock()
}

func (b *limitBackend) serve(nc net.Conn) {
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, pre); err != nil {
		return
	}
	var wmu sync.Mutex
	bw := bufio.NewWriter(nc)
	fr := http2.NewFramer(bw, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	write := func(fn func()) {
		wmu.Lock()
		fn()
		bw.Flush()
		wmu.Unlock()
	}
	var enc bytes.Buffer
	hpack.NewEncoder(&enc).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	head := enc.Bytes()
	limit := b.limit.Load()
	write(func() {
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(limit)})
	})
	open := map[uint32]bool{}
	var answerers sync.WaitGroup
	defer answerers.Wait()
	done := make(chan uint32, 1000)
	loweredHere, ackWanted, acked := false, 0, limit == 1
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
	drain:
		for {
			select {
			case id := <-done:
				delete(open, id)
			default:
				break drain
			}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				write(func() { fr.WriteSettingsAck() })
				continue
			}
			ackWanted--
			if loweredHere && ackWanted == 0 && !acked {
				acked = true
				b.lowerOnce.Do(func() { close(b.lowered) })
			}
		case *http2.RSTStreamFrame:
			delete(open, f.StreamID)
		case *http2.MetaHeadersFrame:
			id := f.StreamID
			b.heads.Add(1)
			if acked && len(open) >= int(limit) {
				b.violations.Add(1)
				b.note("stream %d opened with %d open at a limit of %d", id, len(open), limit)
				write(func() { fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
				continue
			}
			open[id] = true
			if !loweredHere && limit > 1 && len(open) == b.lowerAt {
				loweredHere, limit, ackWanted = true, 1, 1
				b.limit.Store(1)
				write(func() { fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1}) })
			}
			answerers.Add(1)
			go func() {
				defer answerers.Done()
				<-b.release
				write(func() {
					fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: head, EndHeaders: true})
					fr.WriteData(id, true, []byte("ok"))
				})
				done <- id
			}()
		}
	}
}

// TestBackendLoweringItsStreamLimitMidFlight has a backend lower its
// SETTINGS_MAX_CONCURRENT_STREAMS from 100 to 1 while 20 requests are
// open on a connection, then sends 20 more: relay opens no stream over
// the lowered limit once it has acknowledged it, and every request
// succeeds once the backend answers. Then, in rounds, 90 requests come at
// once, so that some have taken their place on the connection when the
// limit drops and send their head after relay acknowledged it: those take
// a stream again rather than go over the limit or fail.
func TestBackendLoweringItsStreamLimitMidFlight(t *testing.T) {
	t.Run("then more", func(t *testing.T) { lowerRound(t, 20, 20) })
	for i := range 5 {
		t.Run(fmt.Sprintf("burst %d", i), func(t *testing.T) { lowerRound(t, 90, 0) })
	}
}

// lowerRound sends first requests, then, once relay acknowledged the
// lowered limit, later ones; the backend answers once every request has
// reached it or ended.
func lowerRound(t *testing.T, first, later int) {
	lb := &limitBackend{lowerAt: 20, release: make(chan struct{}), lowered: make(chan struct{})}
	lb.limit.Store(100)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(lb.release) }) }
	t.Cleanup(release)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
	}}, connBackend(t, lb.serve))
	client := h2Client(t)
	var wg sync.WaitGroup
	var ended atomic.Int64
	errs := make(chan string, first+later)
	get := func(i int) {
		defer wg.Done()
		defer ended.Add(1)
		resp, err := client.Get(fmt.Sprintf("%s/%d", f.url, i))
		if err != nil {
			errs <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			errs <- fmt.Sprintf("request %d: %s %q", i, resp.Status, body)
		}
	}
	for i := range first {
		wg.Add(1)
		go get(i)
	}
	await(t, lb.lowered, "relay's ACK of the lowered limit")
	for i := first; i < first+later; i++ {
		wg.Add(1)
		go get(i)
	}
	waitUntil(t, "every request at the backend or ended", func() bool {
		return lb.heads.Load()-lb.violations.Load()+ended.Load() >= int64(first+later)
	})
	release()
	if !waitGroup(&wg, ioTimeout) {
		t.Fatal("requests hang")
	}
	close(errs)
	for e := range errs {
		t.Errorf("request failed: %s", e)
	}
	if n := lb.violations.Load(); n != 0 {
		t.Errorf("relay opened %d streams over the backend's acknowledged limit: %v", n, lb.msgs)
	}
}
