//go:build ignore

// neighbours measures whether one client flooding a rate limit hurts the
// other clients of the same balancer: the "other clients are unaffected"
// proof of the rate limit (bench/ratelimit.sh runs it).
//
//	go run bench/neighbours.go -addr 127.0.0.1:8080 -duration 10s
//	go run bench/neighbours.go -flood 4 -flood-rate 5000
//
// -quiet clients each hold one keep-alive connection, send their own
// value of the -header field and send -quiet-rate requests a second at a
// steady pace, recording the latency of every request (from writing the
// request to reading the whole answer). With -flood F above 0, F more
// connections all send one value of the field (the flooder's), paced so
// that together they send -flood-rate requests a second; they count the
// answers by status. The flooder is paced rather than closed-loop so that
// it loads relay's rate limit, not the machine's cores.
//
// The quiet clients start -warmup before the measured window (those
// requests are not recorded, so connection setup is not measured); the
// flooder runs exactly in the window. Every request has a deadline, no
// request is sent after the window ends, and everything stops by
// window end + -timeout at the latest.
//
// It prints one line of key=value pairs (latencies in milliseconds) and,
// when there was one, the first quiet error; it exits 1 when a quiet
// request failed, answered other than 200 or could not be sent in time.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

// options are the command line's settings.
type options struct {
	addr       string
	header     string
	quiet      int
	quietRate  float64
	flood      int
	floodRate  float64
	duration   time.Duration
	warmup     time.Duration
	timeout    time.Duration
	maxBehind  time.Duration
	quietValue string
	floodValue string
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "balancer address")
	flag.StringVar(&o.header, "header", "X-Client", "the request field that names the client")
	flag.IntVar(&o.quiet, "quiet", 20, "quiet clients, one connection each")
	flag.Float64Var(&o.quietRate, "quiet-rate", 25, "requests a second of each quiet client")
	flag.IntVar(&o.flood, "flood", 0, "flooder connections, all with one client value (0: no flooder)")
	flag.Float64Var(&o.floodRate, "flood-rate", 5000, "requests a second of the flooder, all connections together")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured window")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "quiet requests before the window, not recorded")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of one request")
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "neighbours:", err)
		os.Exit(2)
	}
	// A flooder that falls this far behind its schedule (a stall, a slow
	// machine) drops the slots it missed instead of sending them at once.
	o.maxBehind = 50 * time.Millisecond
	o.quietValue, o.floodValue = "quiet-", "flooder"

	start := time.Now()
	window := start.Add(o.warmup)
	end := window.Add(o.duration)
	hardEnd := end.Add(o.timeout)

	quiet := make([]quietResult, o.quiet)
	flood := make([]floodResult, o.flood)
	var wg sync.WaitGroup
	for i := range quiet {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			quiet[i] = runQuiet(&o, i, start, window, end, hardEnd)
		}(i)
	}
	for j := range flood {
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			flood[j] = runFlood(&o, j, window, end, hardEnd)
		}(j)
	}
	wg.Wait()
	report(&o, quiet, flood, time.Since(start))
}

// check names the first setting that cannot work.
func (o *options) check() error {
	switch {
	case o.quiet < 0 || o.quiet > 10000:
		return fmt.Errorf("-quiet must be 0 to 10000, not %d", o.quiet)
	case o.quiet > 0 && (o.quietRate <= 0 || o.quietRate > 1000):
		return fmt.Errorf("-quiet-rate must be above 0 and at most 1000, not %g", o.quietRate)
	case o.flood < 0 || o.flood > 1000:
		return fmt.Errorf("-flood must be 0 to 1000, not %d", o.flood)
	case o.flood > 0 && (o.floodRate <= 0 || o.floodRate > 1e6):
		return fmt.Errorf("-flood-rate must be above 0 and at most 1000000, not %g", o.floodRate)
	case o.duration <= 0 || o.duration > time.Hour:
		return fmt.Errorf("-duration must be above 0 and at most 1h, not %s", o.duration)
	case o.warmup < 0 || o.warmup > time.Hour:
		return fmt.Errorf("-warmup must be 0 to 1h, not %s", o.warmup)
	case o.timeout <= 0 || o.timeout > time.Minute:
		return fmt.Errorf("-timeout must be above 0 and at most 1m, not %s", o.timeout)
	case o.header == "":
		return errors.New("-header must name a field")
	case o.quiet == 0 && o.flood == 0:
		return errors.New("nothing to run: -quiet and -flood are both 0")
	}
	return nil
}

// conn is one keep-alive client connection that redials after a failure
// or when the server closes it.
type conn struct {
	o       *options
	req     []byte
	c       net.Conn
	br      *bufio.Reader
	dials   int
	lastErr error
}

func newConn(o *options, value string) *conn {
	req := fmt.Sprintf("GET / HTTP/1.1\r\nHost: relay\r\n%s: %s\r\n\r\n", o.header, value)
	return &conn{o: o, req: []byte(req)}
}

// do sends one request and reads its answer by deadline, returning the
// status, or 0 and an error.
func (k *conn) do(deadline time.Time) (int, error) {
	if k.c == nil {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", k.o.addr)
		if err != nil {
			return 0, fmt.Errorf("dial: %w", err)
		}
		k.c, k.dials = c, k.dials+1
		if k.br == nil {
			k.br = bufio.NewReaderSize(c, 1024)
		} else {
			k.br.Reset(c)
		}
	}
	k.c.SetDeadline(deadline)
	status, closed, err := k.exchange()
	if err != nil || closed {
		k.close()
	}
	return status, err
}

func (k *conn) exchange() (status int, closed bool, err error) {
	if _, err := k.c.Write(k.req); err != nil {
		return 0, true, err
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		return 0, true, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, true, err
	}
	return resp.StatusCode, resp.Close, nil
}

func (k *conn) close() {
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// quietResult is what one quiet client saw in the window.
type quietResult struct {
	lat      []time.Duration // of each answered request in the window
	sent     int             // requests sent in the window
	non200   int
	errs     int
	unsent   int // slots of the window left unsent when time ran out
	late     int // requests sent more than one interval after their slot
	dials    int
	firstErr error
}

// runQuiet sends quiet client i's requests, one every 1/quietRate
// seconds from start (client i's first slot offset by i/quiet of an
// interval, so the clients do not send in step), until end.
func runQuiet(o *options, i int, start, window, end, hardEnd time.Time) quietResult {
	var r quietResult
	k := newConn(o, fmt.Sprintf("%s%d", o.quietValue, i))
	defer k.close()
	every := time.Duration(float64(time.Second) / o.quietRate)
	slot := start.Add(every * time.Duration(i) / time.Duration(o.quiet))
	r.lat = make([]time.Duration, 0, int(o.duration.Seconds()*o.quietRate)+1)
	for ; slot.Before(end); slot = slot.Add(every) {
		measured := !slot.Before(window)
		if wait := time.Until(slot); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Now()
		if !now.Before(hardEnd) {
			if measured {
				r.unsent++
			}
			continue
		}
		deadline := now.Add(o.timeout)
		if deadline.After(hardEnd) {
			deadline = hardEnd
		}
		status, err := k.do(deadline)
		took := time.Since(now)
		if !measured {
			continue
		}
		r.sent++
		if now.Sub(slot) > every {
			r.late++
		}
		switch {
		case err != nil:
			r.errs++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("quiet client %d: %w", i, err)
			}
		case status != 200:
			r.non200++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("quiet client %d: status %d", i, status)
			}
		default:
			r.lat = append(r.lat, took)
		}
	}
	r.dials = k.dials
	return r
}

// floodResult is what one flooder connection saw.
type floodResult struct {
	sent, ok, limited, other, errs int
	dropped                        int // slots skipped after falling behind
	first, last                    time.Time
	firstErr                       error
}

// runFlood sends flooder connection j's share of the flood from window to
// end, one request every flood/floodRate seconds.
func runFlood(o *options, j int, window, end, hardEnd time.Time) floodResult {
	var r floodResult
	k := newConn(o, o.floodValue)
	defer k.close()
	every := time.Duration(float64(time.Second) * float64(o.flood) / o.floodRate)
	slot := window.Add(every * time.Duration(j) / time.Duration(o.flood))
	for ; slot.Before(end); slot = slot.Add(every) {
		if wait := time.Until(slot); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Now()
		if !now.Before(end) {
			break
		}
		if behind := now.Sub(slot); behind > o.maxBehind {
			skip := int(behind / every)
			r.dropped += skip
			slot = slot.Add(every * time.Duration(skip))
		}
		deadline := now.Add(o.timeout)
		if deadline.After(hardEnd) {
			deadline = hardEnd
		}
		if r.sent == 0 {
			r.first = now
		}
		r.last = now
		r.sent++
		status, err := k.do(deadline)
		switch {
		case err != nil:
			r.errs++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("flooder connection %d: %w", j, err)
			}
		case status == 200:
			r.ok++
		case status == 429:
			r.limited++
		default:
			r.other++
		}
	}
	return r
}

// percentile is the nearest-rank p-th percentile of sorted, in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return ms(sorted[i])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func report(o *options, quiet []quietResult, flood []floodResult, took time.Duration) {
	var q quietResult
	var lat []time.Duration
	for _, r := range quiet {
		lat = append(lat, r.lat...)
		q.sent += r.sent
		q.non200 += r.non200
		q.errs += r.errs
		q.unsent += r.unsent
		q.late += r.late
		q.dials += r.dials
		if q.firstErr == nil {
			q.firstErr = r.firstErr
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })

	var f floodResult
	for _, r := range flood {
		f.sent += r.sent
		f.ok += r.ok
		f.limited += r.limited
		f.other += r.other
		f.errs += r.errs
		f.dropped += r.dropped
		if r.sent > 0 && (f.first.IsZero() || r.first.Before(f.first)) {
			f.first = r.first
		}
		if r.last.After(f.last) {
			f.last = r.last
		}
		if f.firstErr == nil {
			f.firstErr = r.firstErr
		}
	}
	var floodSecs float64
	if f.sent > 0 {
		floodSecs = f.last.Sub(f.first).Seconds()
	}
	var target int
	if o.flood > 0 {
		target = int(o.floodRate * o.duration.Seconds())
	}

	fmt.Printf("quiet=%d quiet_sent=%d quiet_ok=%d quiet_errors=%d quiet_non200=%d quiet_unsent=%d quiet_late=%d quiet_dials=%d "+
		"p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f "+
		"flood_conns=%d flood_target=%d flood_sent=%d flood_200=%d flood_429=%d flood_other=%d flood_errors=%d flood_dropped=%d flood_s=%.3f "+
		"window_s=%.3f total_s=%.3f\n",
		o.quiet, q.sent, len(lat), q.errs, q.non200, q.unsent, q.late, q.dials,
		percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), percentile(lat, 100),
		o.flood, target, f.sent, f.ok, f.limited, f.other, f.errs, f.dropped, floodSecs,
		o.duration.Seconds(), took.Seconds())
	if q.firstErr != nil {
		fmt.Printf("first quiet error: %v\n", q.firstErr)
	}
	if f.firstErr != nil {
		fmt.Printf("first flooder error: %v\n", f.firstErr)
	}
	if q.errs > 0 || q.non200 > 0 || q.unsent > 0 {
		os.Exit(1)
	}
}
