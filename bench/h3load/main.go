// h3load is a closed-loop HTTP/3 load generator: -c QUIC connections,
// each with -m requests in flight at once (one stream each, the next sent
// as soon as the last response's body is read), for -d, against one URL.
// It prints requests per second, errors, status classes and the latency
// percentiles (p50, p90, p99, p99.9) of whole responses, and exits 1 when
// no request succeeded.
//
//	go run ./bench/h3load -c 20 -m 10 -d 10s -ca ca.pem https://127.0.0.1:8443/
//
// There is no other HTTP/3 load generator on Debian (its h2load and curl
// lack HTTP/3), and the comparison with Caddy needs one that both
// balancers face alike. Every connection is its own QUIC connection from
// its own UDP socket, so a balancer with several processes sees as many
// four-tuples as connections.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Options are one run's settings.
type Options struct {
	URL        string
	Conns      int           // QUIC connections
	Streams    int           // requests in flight per connection
	Duration   time.Duration // how long requests are sent
	Timeout    time.Duration // one request's bound
	ServerName string        // SNI; "" is the URL's host
	Roots      *x509.CertPool
	Insecure   bool
}

// Result is what a run saw.
type Result struct {
	Requests  uint64 // responses read whole
	Errors    uint64 // requests that failed: dial, stream, reset, body
	Status    [6]uint64
	Elapsed   time.Duration
	Latencies *Histogram
	FirstErr  error
}

// Rate is completed requests per second.
func (r *Result) Rate() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

func main() {
	o := Options{}
	flag.IntVar(&o.Conns, "c", 10, "QUIC connections")
	flag.IntVar(&o.Streams, "m", 10, "requests in flight per connection")
	flag.DurationVar(&o.Duration, "d", 10*time.Second, "duration")
	flag.DurationVar(&o.Timeout, "timeout", 5*time.Second, "one request's bound")
	flag.StringVar(&o.ServerName, "servername", "", "TLS server name (default: the URL's host)")
	ca := flag.String("ca", "", "PEM file of the roots to trust (default: the system's)")
	flag.BoolVar(&o.Insecure, "k", false, "do not verify the server's certificate")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: h3load [-c N] [-m M] [-d D] [-ca FILE | -k] https://HOST:PORT/PATH")
		os.Exit(2)
	}
	o.URL = flag.Arg(0)
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			fmt.Fprintln(os.Stderr, "h3load:", err)
			os.Exit(2)
		}
		o.Roots = x509.NewCertPool()
		if !o.Roots.AppendCertsFromPEM(pem) {
			fmt.Fprintf(os.Stderr, "h3load: %s holds no PEM certificate\n", *ca)
			os.Exit(2)
		}
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "h3load:", err)
		os.Exit(2)
	}
	fmt.Print(Report(o, r))
	if r.Requests == 0 {
		os.Exit(1)
	}
}

// Report is a run's summary: a line for people, then one tab-separated
// line (requests, errors, req/s, p50, p99 in ms) for scripts.
func Report(o Options, r *Result) string {
	h := r.Latencies
	s := fmt.Sprintf("%d connections x %d streams, %v: %d requests, %.0f req/s, %d errors, 2xx %d 3xx %d 4xx %d 5xx %d\n",
		o.Conns, o.Streams, r.Elapsed.Round(time.Millisecond), r.Requests, r.Rate(), r.Errors, r.Status[2], r.Status[3], r.Status[4], r.Status[5])
	s += fmt.Sprintf("latency p50 %s p90 %s p99 %s p99.9 %s\n", h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99), h.Quantile(0.999))
	if r.FirstErr != nil {
		s += fmt.Sprintf("first error: %v\n", r.FirstErr)
	}
	s += fmt.Sprintf("h3load\t%d\t%d\t%.0f\t%.3f\t%.3f\n", r.Requests, r.Errors, r.Rate(),
		ms(h.Quantile(0.5)), ms(h.Quantile(0.99)))
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Run makes the load and returns what it saw.
func Run(ctx context.Context, o Options) (*Result, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("URL %q: want https://HOST:PORT/PATH", o.URL)
	}
	if o.Conns < 1 || o.Streams < 1 || o.Duration <= 0 {
		return nil, errors.New("-c and -m must be at least 1 and -d positive")
	}
	addr := u.Host
	if u.Port() == "" {
		addr += ":443"
	}
	sni := o.ServerName
	if sni == "" {
		sni = u.Hostname()
	}
	tlsConf := &tls.Config{ServerName: sni, RootCAs: o.Roots, InsecureSkipVerify: o.Insecure, NextProtos: []string{http3.NextProtoH3}}
	qconf := &quic.Config{MaxIncomingStreams: -1, KeepAlivePeriod: 0}

	r := &Result{Latencies: &Histogram{}}
	var firstErr sync.Once
	fail := func(err error) {
		atomic.AddUint64(&r.Errors, 1)
		firstErr.Do(func() { r.FirstErr = err })
	}
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			connection(runCtx, o, addr, tlsConf, qconf, r, fail)
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	return r, nil
}

// connection runs one QUIC connection's streams until ctx ends, dialing
// again when the connection is lost.
func connection(ctx context.Context, o Options, addr string, tlsConf *tls.Config, qconf *quic.Config, r *Result, fail func(error)) {
	tr := &http3.Transport{}
	defer tr.Close()
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, o.Timeout)
		qc, err := quic.DialAddr(dctx, addr, tlsConf.Clone(), qconf)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				fail(fmt.Errorf("dial %s: %w", addr, err))
				wait(ctx, 100*time.Millisecond)
			}
			continue
		}
		cc := tr.NewClientConn(qc)
		var wg sync.WaitGroup
		for range o.Streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && cc.Context().Err() == nil {
					request(ctx, o, cc, r, fail)
				}
			}()
		}
		wg.Wait()
		qc.CloseWithError(0, "")
	}
}

// request makes one request on cc and counts it.
func request(ctx context.Context, o Options, cc *http3.ClientConn, r *Result, fail func(error)) {
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, o.URL, nil)
	if err != nil {
		fail(err)
		return
	}
	t0 := time.Now()
	resp, err := cc.RoundTrip(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		if ctx.Err() == nil { // a request cut by the run's end is not an error
			fail(err)
		}
		return
	}
	r.Latencies.Add(time.Since(t0))
	atomic.AddUint64(&r.Requests, 1)
	if c := resp.StatusCode / 100; c >= 1 && c <= 5 {
		atomic.AddUint64(&r.Status[c], 1)
	}
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
