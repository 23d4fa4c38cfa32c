package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/testcert"
)

// cpuTicks is the CPU time relay (pid and its serving processes) has used,
// in clock ticks (1/100 s on Linux).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	total := 0
	pids := processTree(pid)
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the line.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		total += u + s
	}
	return total
}

// floodH2 writes frames, as frame encodes them, to h in batches of about
// 64 KiB, up to max frames, while a goroutine reads what relay
// sends; it stops when relay sends GOAWAY or the connection ends, and
// waits up to 10 s for the end. It returns the frames written, the GOAWAY
// code (if any) and whether relay closed the connection.
func floodH2(t *testing.T, h *h2Conn, max int, frame func(fr *http2.Framer)) (sent int, code http2.ErrCode, sawGoAway, closed bool) {
	t.Helper()
	var batch bytes.Buffer
	bf := http2.NewFramer(&batch, nil)
	type end struct {
		code      http2.ErrCode
		sawGoAway bool
		closed    bool
	}
	ended := make(chan end, 1)
	goAway := make(chan struct{})
	go func() {
		var e end
		h.c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				var ne net.Error
				e.closed = !(errors.As(err, &ne) && ne.Timeout())
				ended <- e
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok && !e.sawGoAway {
				e.code, e.sawGoAway = ga.ErrCode, true
				close(goAway)
			}
		}
	}()
	h.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
write:
	for sent < max {
		select {
		case <-goAway:
			break write
		default:
		}
		batch.Reset()
		per := 0
		for batch.Len() < 64<<10 {
			frame(bf)
			per++
		}
		if _, err := h.c.Write(batch.Bytes()); err != nil {
			break
		}
		sent += per
	}
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	e := <-ended
	return sent, e.code, e.sawGoAway, e.closed
}

// cutOff reports whether relay ended a flooding connection as it should:
// closed, after GOAWAY ENHANCE_YOUR_CALM. relay reads at most 64 KiB after
// its GOAWAY before it closes; a client that has written far more, as
// these do, may then be reset before it reads the GOAWAY, so a close
// without one counts too (the h2 package's tests, whose clients stop
// writing at the GOAWAY, see it every time).
func cutOff(closed, sawGoAway bool, code http2.ErrCode) bool {
	return closed && (!sawGoAway || code == http2.ErrCodeEnhanceYourCalm)
}

// Floods of frames that carry no request, from a client that reads all
// relay sends (CVE-2019-9512 PING, -9515 SETTINGS, -9518 empty frames),
// are cut off with GOAWAY ENHANCE_YOUR_CALM after a bounded number of
// frames, at a bounded cost, and another client is served throughout.
func TestHTTP2ControlFloodsAreCutOff(t *testing.T) {
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "", ca.Server(t, testcert.ECDSA, "a.example"))
	by := startBystander(t, tr)
	const max = 1_000_000

	floods := []struct {
		name  string
		open  func(h *h2Conn) // what the flood needs first
		frame func(fr *http2.Framer)
	}{
		{"PING", nil, func(fr *http2.Framer) { fr.WritePing(false, [8]byte{'p'}) }},
		{"SETTINGS", nil, func(fr *http2.Framer) { fr.WriteSettings() }},
		{"PRIORITY", nil, func(fr *http2.Framer) { fr.WritePriority(1, http2.PriorityParam{Weight: 1}) }},
		{"WINDOW_UPDATE", nil, func(fr *http2.Framer) { fr.WriteWindowUpdate(0, 1) }},
		{"empty DATA", func(h *h2Conn) {
			h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock("/"), EndHeaders: true})
		}, func(fr *http2.Framer) { fr.WriteData(1, false, nil) }},
	}
	var report []string
	for _, fl := range floods {
		h := dialH2(t, tr)
		if fl.open != nil {
			fl.open(h)
		}
		before := cpuTicks(t, tr.cmd.Process.Pid)
		start := time.Now()
		sent, code, sawGoAway, closed := floodH2(t, h, max, fl.frame)
		took := time.Since(start)
		cpu := cpuTicks(t, tr.cmd.Process.Pid) - before
		report = append(report, fmt.Sprintf("%s: %d frames written in %v, relay CPU %d ms, GOAWAY %v (%v), closed %v",
			fl.name, sent, took.Round(time.Millisecond), cpu*10, sawGoAway, code, closed))
		if !cutOff(closed, sawGoAway, code) {
			t.Errorf("%s flood: %d frames; GOAWAY %v (%v), closed %v; want GOAWAY ENHANCE_YOUR_CALM and the end", fl.name, sent, sawGoAway, code, closed)
		}
		if sent >= max {
			t.Errorf("%s flood: relay took all %d frames", fl.name, sent)
		}
	}
	t.Logf("%s; %s", strings.Join(report, "; "), by.check(t))
}

// A Rapid Reset padded with requests relay refuses itself (400), which
// kept the cancelled share under half, is cut off within the streams the
// rule allows, at a bounded cost, and another client is served
// throughout.
func TestHTTP2RapidResetPaddedWithRefusalsIsCutOff(t *testing.T) {
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "", ca.Server(t, testcert.ECDSA, "a.example"))
	by := startBystander(t, tr)
	good, bad := headerBlock("/"), headerBlock("no-slash")

	h := dialH2(t, tr)
	before := cpuTicks(t, tr.cmd.Process.Pid)
	start := time.Now()
	id, next := uint32(1), 0
	sent, code, sawGoAway, closed := floodH2(t, h, 1_000_000, func(fr *http2.Framer) {
		// HEADERS then RST_STREAM, then a HEADERS relay answers 400.
		switch next {
		case 0:
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: good, EndStream: true, EndHeaders: true})
		case 1:
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		case 2:
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: bad, EndStream: true, EndHeaders: true})
			id += 2
		}
		next = (next + 1) % 3
	})
	took := time.Since(start)
	cpu := cpuTicks(t, tr.cmd.Process.Pid) - before
	t.Logf("%d frames written in %v, relay CPU %d ms, GOAWAY %v (%v), closed %v; %s",
		sent, took.Round(time.Millisecond), cpu*10, sawGoAway, code, closed, by.check(t))
	if !cutOff(closed, sawGoAway, code) {
		t.Errorf("%d frames; GOAWAY %v (%v), closed %v; want GOAWAY ENHANCE_YOUR_CALM and the end", sent, sawGoAway, code, closed)
	}
}
