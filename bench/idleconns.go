//go:build ignore

// idleconns holds many keep-alive client connections open against a
// balancer, mostly idle, and checks that every one of them still works at
// the end: the 10,000-connection test of BENCHMARKS.md.
//
//	go run bench/idleconns.go -addr 127.0.0.1:8080 -conns 10000 -hold 20s
//
// Each connection sends one GET and reads its response, then idles for
// -hold (sending one more GET every -every, if set), then sends a last GET;
// connections open and send their last GET at -rate per second.
// It prints how many connections opened, how many requests failed and how
// long the opening took, and exits 1 on any error. Connections come from
// 127.0.0.2-127.0.0.254 in turn so the ephemeral ports of one source address
// are not exhausted. Run a load (wrk) beside it to test idle and busy
// connections together.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "balancer address")
	conns := flag.Int("conns", 10000, "connections to hold")
	hold := flag.Duration("hold", 20*time.Second, "how long to hold them")
	every := flag.Duration("every", 0, "send a request on each connection this often while holding (0: stay idle)")
	rate := flag.Int("rate", 2000, "connections opened per second at most")
	flag.Parse()

	var (
		opened, failed atomic.Int64
		firstErr       atomic.Value
		wg             sync.WaitGroup
	)
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	start := time.Now()
	// Connection i sends its last request at end plus i/rate, so the checks
	// come at the pace the connections opened, not as one burst.
	end := start.Add(*hold)
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	for i := 0; i < *conns; i++ {
		<-tick.C
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%253))}
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: src}
			c, err := d.Dial("tcp", *addr)
			if err != nil {
				fail(fmt.Errorf("dial: %w", err))
				return
			}
			defer c.Close()
			opened.Add(1)
			br := bufio.NewReaderSize(c, 512)
			get := func() error {
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
					return err
				}
				resp, err := http.ReadResponse(br, nil)
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
			if err := get(); err != nil {
				fail(fmt.Errorf("first request: %w", err))
				return
			}
			end := end.Add(time.Duration(i) * time.Second / time.Duration(*rate))
			for {
				wait := time.Until(end)
				if *every > 0 && *every < wait {
					wait = *every
				}
				if wait <= 0 {
					break
				}
				time.Sleep(wait)
				if time.Now().Before(end) {
					if err := get(); err != nil {
						fail(fmt.Errorf("request while holding: %w", err))
						return
					}
				}
			}
			if err := get(); err != nil {
				fail(fmt.Errorf("last request: %w", err))
			}
		}(i)
	}
	openedIn := time.Since(start)
	wg.Wait()
	fmt.Printf("connections=%d opened=%d failed=%d open_time=%s total=%s\n",
		*conns, opened.Load(), failed.Load(), openedIn.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if e := firstErr.Load(); e != nil {
		fmt.Printf("first error: %s\n", e)
	}
	if failed.Load() > 0 {
		os.Exit(1)
	}
}
