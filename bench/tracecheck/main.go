// Command tracecheck is the client and the judge of bench/tracing.sh: it
// sends requests through relay, each with a traceparent of its own, and
// then checks the spans an OpenTelemetry Collector wrote (its file
// exporter's OTLP JSON) and the traceparent each backend got (an nginx
// access log of $http_traceparent) against what was sent.
//
//	tracecheck -load http://127.0.0.1:8280/ -n 10000 -c 8 -seed 1 -sent FILE
//	    sends n GET requests over c keep-alive connections, each with the
//	    traceparent 00-TRACE-SPAN-01 of a trace and span drawn from seed
//	    (0: at random), and writes "TRACE SPAN" per request to FILE. Exits
//	    1 if any request fails or is answered other than 200.
//	tracecheck -check -sent FILE -spans FILE -backend-log FILE -ratio 1 [-min N -max N] [-wait 60s]
//	    waits (up to -wait) until the spans file holds a span of every sent
//	    trace the sample ratio admits (every one at 1; those whose trace id
//	    OpenTelemetry's TraceIDRatioBased admits otherwise, as relay decides),
//	    then for a few seconds more, and checks: exactly one span per
//	    admitted trace and none of any other trace; each span's parent is
//	    the client's span, its status 200; the backend got each request's
//	    traceparent in the client's trace with relay's span id as the
//	    parent, sampled exactly when a span was exported; the count within
//	    -min and -max when given. Prints one line of counts; exits 1 on any
//	    mismatch.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	load := flag.String("load", "", "URL to send -n requests to")
	n := flag.Int("n", 10000, "requests to send (-load)")
	conns := flag.Int("c", 8, "keep-alive connections, one request at a time on each (-load)")
	seed := flag.Uint64("seed", 0, "seed of the trace and span ids (-load); 0 draws them at random")
	check := flag.Bool("check", false, "check the spans and the backend log against -sent")
	sent := flag.String("sent", "", "file of the sent requests' trace and span ids")
	spans := flag.String("spans", "", "the collector's file exporter output (-check)")
	backendLog := flag.String("backend-log", "", "the backends' log of $http_traceparent, one per line (-check)")
	ratio := flag.Float64("ratio", 1, "relay's sample ratio (-check)")
	minSpans := flag.Int("min", -1, "fewest spans allowed (-check)")
	maxSpans := flag.Int("max", -1, "most spans allowed (-check)")
	wait := flag.Duration("wait", 60*time.Second, "longest wait for the spans (-check)")
	settle := flag.Duration("settle", 3*time.Second, "how long to wait for stray spans once the expected ones are in (-check)")
	flag.Parse()

	var err error
	switch {
	case *load != "" && *sent != "":
		err = runLoad(*load, *n, *conns, *seed, *sent)
	case *check && *sent != "" && *spans != "" && *backendLog != "":
		err = runCheck(*sent, *spans, *backendLog, *ratio, *minSpans, *maxSpans, *wait, *settle)
	default:
		err = errors.New("give -load URL -sent FILE, or -check -sent FILE -spans FILE -backend-log FILE (see -h)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracecheck:", err)
		os.Exit(1)
	}
}

// ids is one request's trace and the client's span.
type ids struct {
	trace [16]byte
	span  [8]byte
}

func makeIDs(n int, seed uint64) []ids {
	out := make([]ids, n)
	var rng *mrand.Rand
	if seed != 0 {
		rng = mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
	for i := range out {
		for isZero(out[i].trace[:]) || isZero(out[i].span[:]) {
			if rng == nil {
				rand.Read(out[i].trace[:])
				rand.Read(out[i].span[:])
				continue
			}
			binary.BigEndian.PutUint64(out[i].trace[:8], rng.Uint64())
			binary.BigEndian.PutUint64(out[i].trace[8:], rng.Uint64())
			binary.BigEndian.PutUint64(out[i].span[:], rng.Uint64())
		}
	}
	return out
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func runLoad(url string, n, conns int, seed uint64, sentFile string) error {
	all := makeIDs(n, seed)
	f, err := os.Create(sentFile)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, id := range all {
		fmt.Fprintf(w, "%x %x\n", id.trace, id.span)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := get(client, url, all[i]); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	fmt.Printf("sent %d requests over %d keep-alive connections in %.2f s (%.0f req/s), %d failed\n",
		n, conns, took.Seconds(), float64(n)/took.Seconds(), failed.Load())
	if failed.Load() > 0 {
		return fmt.Errorf("%d of %d requests failed; the first: %v", failed.Load(), n, firstErr.Load())
	}
	return nil
}

func get(c *http.Client, url string, id ids) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Traceparent", fmt.Sprintf("00-%x-%x-01", id.trace, id.span))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// admits is OpenTelemetry's TraceIDRatioBased, which relay's sampler is:
// the trace id's last 8 bytes, big-endian, shifted right by one, below
// ratio x 2^63.
func admits(ratio float64, trace [16]byte) bool {
	if ratio >= 1 {
		return true
	}
	if !(ratio > 0) {
		return false
	}
	return binary.BigEndian.Uint64(trace[8:])>>1 < uint64(ratio*(1<<63))
}

// span is what the check reads of an OTLP JSON span; ids are hex.
type span struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Attributes   []struct {
		Key   string `json:"key"`
		Value struct {
			String string `json:"stringValue"`
			Int    string `json:"intValue"`
		} `json:"value"`
	} `json:"attributes"`
}

func (s *span) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.String + a.Value.Int
		}
	}
	return ""
}

// readSpans reads every span of the file exporter's output: one
// TracesData in OTLP JSON per line. A last line being written is left
// for the next read.
func readSpans(file string) ([]span, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []span
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if !complete || len(bytes.TrimSpace(line)) == 0 {
			break
		}
		var td struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(line, &td); err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out, nil
}

func readSent(file string) (map[string]string, []string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	bySpan := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tr, sp, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, nil, fmt.Errorf("%s: line %q", file, sc.Text())
		}
		bySpan[tr] = sp
		order = append(order, tr)
	}
	return bySpan, order, sc.Err()
}

// backendParent is what a backend got: relay's span id and the flags.
type backendParent struct {
	span, flags string
	n           int
}

// readBackendLog reads the backends' lines: the traceparent of each
// request, "-" for a request without one, which is counted apart.
func readBackendLog(file string) (out map[string]*backendParent, bad, without int, err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	out = map[string]*backendParent{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v := strings.TrimSpace(sc.Text())
		if v == "-" || v == "" {
			without++
			continue
		}
		// 00-TRACE-SPAN-FLAGS, nothing else: two fields joined, or a
		// malformed one, counts as bad.
		p := strings.Split(v, "-")
		if len(v) != 55 || len(p) != 4 || p[0] != "00" {
			bad++
			continue
		}
		if bp := out[p[1]]; bp != nil {
			bp.n++
			continue
		}
		out[p[1]] = &backendParent{span: p[2], flags: p[3], n: 1}
	}
	return out, bad, without, sc.Err()
}

func runCheck(sentFile, spansFile, backendLog string, ratio float64, minSpans, maxSpans int, wait, settle time.Duration) error {
	sent, order, err := readSent(sentFile)
	if err != nil {
		return err
	}
	admitted := map[string]bool{}
	for _, tr := range order {
		b, err := hex.DecodeString(tr)
		if err != nil || len(b) != 16 {
			return fmt.Errorf("%s: trace id %q", sentFile, tr)
		}
		if admits(ratio, [16]byte(b)) {
			admitted[tr] = true
		}
	}
	// Wait for a span of every admitted trace, then a little more for
	// any that should not be there.
	deadline := time.Now().Add(wait)
	var spans []span
	start := time.Now()
	for {
		if spans, err = readSpans(spansFile); err != nil {
			return err
		}
		seen := 0
		for _, s := range spans {
			if admitted[s.TraceID] {
				seen++
			}
		}
		if seen >= len(admitted) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	waited := time.Since(start)
	time.Sleep(settle)
	if spans, err = readSpans(spansFile); err != nil {
		return err
	}
	backends, badLines, without, err := readBackendLog(backendLog)
	if err != nil {
		return err
	}

	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	got := map[string]int{}
	stray, dup, parentsRight, backendRight, not200 := 0, 0, 0, 0, 0
	for _, s := range spans {
		client, ours := sent[s.TraceID]
		switch {
		case !ours:
			stray++
			problem("span %s of trace %s, which no request of this run had", s.SpanID, s.TraceID)
			continue
		case !admitted[s.TraceID]:
			problem("span of trace %s, which the sample ratio %v does not admit", s.TraceID, ratio)
		}
		if got[s.TraceID]++; got[s.TraceID] > 1 {
			dup++
			problem("trace %s has %d spans", s.TraceID, got[s.TraceID])
		}
		if s.ParentSpanID == client {
			parentsRight++
		} else {
			problem("span %s of trace %s: parent %q, the client's span is %s", s.SpanID, s.TraceID, s.ParentSpanID, client)
		}
		if bp := backends[s.TraceID]; bp != nil && bp.span == s.SpanID && bp.n == 1 {
			backendRight++
		} else {
			problem("span %s of trace %s: the backend got %+v", s.SpanID, s.TraceID, bp)
		}
		if s.attr("http.response.status_code") != "200" {
			not200++
			problem("span %s: status %q", s.SpanID, s.attr("http.response.status_code"))
		}
	}
	missing := 0
	for tr := range admitted {
		if got[tr] == 0 {
			missing++
			problem("no span of trace %s", tr)
		}
	}
	// Every request reached a backend with exactly one traceparent, in its
	// trace, sampled exactly when relay exported its span.
	backendSeen, flagsWrong := 0, 0
	for _, tr := range order {
		bp := backends[tr]
		if bp == nil || bp.n != 1 {
			problem("trace %s: the backend got %+v", tr, bp)
			continue
		}
		backendSeen++
		want := "00"
		if admitted[tr] {
			want = "01"
		}
		if bp.flags != want {
			flagsWrong++
			problem("trace %s: the backend's flags %s, want %s", tr, bp.flags, want)
		}
	}
	inRange := (minSpans < 0 || len(spans) >= minSpans) && (maxSpans < 0 || len(spans) <= maxSpans)
	if !inRange {
		problem("%d spans, want %d to %d", len(spans), minSpans, maxSpans)
	}
	verdict := "OK"
	if len(problems) > 0 || badLines > 0 {
		verdict = "FAILED"
	}
	bounds := ""
	if minSpans >= 0 || maxSpans >= 0 {
		bounds = fmt.Sprintf(" (allowed %d-%d)", minSpans, maxSpans)
	}
	fmt.Printf("sample %v: %d spans of %d requests%s, %d expected by the ratio; %d missing, %d duplicated, %d of other traces; "+
		"parent = client span: %d; backend's parent = relay's span: %d; not 200: %d; "+
		"backend got one traceparent for %d of %d requests (flags wrong %d; malformed lines %d; lines without one, of other requests, %d); "+
		"spans in after %.1f s: %s\n",
		ratio, len(spans), len(order), bounds, len(admitted), missing, dup, stray, parentsRight, backendRight, not200,
		backendSeen, len(order), flagsWrong, badLines, without, waited.Seconds(), verdict)
	if verdict != "OK" {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}
