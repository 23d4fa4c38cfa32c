// Command server is relay's demo and test backend: a small HTTP server that
// says which port answered and can be made slow, failing or unhealthy on
// demand, and can announce itself in etcd for relays that discover
// backends there. It uses the standard library, relay's demo package, and
// for -register relay's discovery package and the etcd client.
//
//	PORT=8001 go run ./cmd/server
//	go run ./cmd/server -port 8002
//	go run ./cmd/server -addr 127.0.0.1:8003 -quiet
//	go run ./cmd/server -port 8004 -register http://127.0.0.1:2379
//
// Flags: -port (default $PORT, else 8001), -addr host:port (overrides -port),
// -quiet (log nothing, not even the start line), and for registration:
//
//	-register ENDPOINTS   etcd client URLs, comma-separated (http://127.0.0.1:2379);
//	                      empty, the default, announces nothing
//	-register-prefix P    the prefix relay watches (default /relay/backends/)
//	-register-key NAME    the key's name after the prefix (default the
//	                      advertised HOST:PORT, after POOL/ outside the pool
//	                      "default")
//	-register-ttl D       the key's lease (default 10s, at least 2s)
//	-advertise URL        where relays reach this server (default
//	                      http://HOST:PORT: the listen host, 127.0.0.1 when
//	                      listening on all interfaces, and the port listened on)
//	-weight N             the weight announced (default 1, 1..1000)
//	-pool NAME            the relay pool announced (default "default"; a-z,
//	                      0-9, _ and -, as relay's pool names)
//
// With -register, once the server listens it puts the key
// PREFIX+NAME = {"url": "http://HOST:PORT", "weight": N, "pool": "NAME"}
// (no "pool" for the pool "default") under a lease it
// keeps alive, and puts it again whenever etcd lost it; a server killed
// outright disappears when the lease runs out. An unreachable etcd never
// stops the server from serving: it retries and logs. The other
// registration flags need -register.
//
// Endpoints:
//
//	GET  /                   "Hello World from PORT server\n" (every unlisted path too)
//	GET  /health             200 "ok\n", or 503 "failing\n" while health is switched off
//	ANY  /echo, /echo/...    the request as JSON: method, path, proto, host, headers,
//	                         body_length, remote_addr (plus transfer_encoding, trailers)
//	GET  /download?size=N    N bytes with Content-Length; &chunked=1 sends them chunked
//	ANY  /upload             reads the body, answers JSON {"bytes": N}
//	POST /admin/health/fail  make /health answer 503
//	POST /admin/health/ok    make /health answer 200 again
//
// Query switches on every path: ?delay=200ms waits before answering (a Go
// duration up to 5m); ?status=503 answers with that code (200 to 999).
//
// Signals: SIGUSR1 toggles /health between 200 and 503 without a restart;
// SIGINT and SIGTERM stop the server gracefully: first the -register key is
// revoked, so relays stop sending new requests, then requests in flight
// may finish for up to 10 seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"relay/demo"
)

// shutdownWindow is how long requests in flight may take to finish after
// SIGINT or SIGTERM.
const shutdownWindow = 10 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stderr, nil))
}

// run is the whole program; it returns the exit status. ready, when not nil,
// is called with the listening address once signals are being handled, so
// tests know when to connect and when signals are safe to send.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaultPort := getenv("PORT")
	if defaultPort == "" {
		defaultPort = "8001"
	}
	port := fs.String("port", defaultPort, "`port` to listen on, on all interfaces; $PORT sets the default")
	addr := fs.String("addr", "", "`host:port` to listen on; overrides -port")
	quiet := fs.Bool("quiet", false, "log nothing, not even the start line")
	var reg registration
	reg.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "server is relay's demo and test backend.\n\n"+
			"Usage: PORT=8001 server [flags]\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\n%s\nSignals:\n"+
			"  SIGUSR1                  toggle /health between 200 and 503\n"+
			"  SIGINT, SIGTERM          stop: withdraw the -register key, then let requests\n"+
			"                           in flight finish (up to %v)\n",
			demo.Usage, shutdownWindow)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "server: unexpected arguments %q\n", fs.Args())
		return 2
	}
	listenAddr, err := resolveAddr(*addr, *port)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := reg.check(set); err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 2
	}

	logger := log.New(stderr, "server: ", log.LstdFlags)
	slogger := slog.New(slog.NewTextHandler(stderr, nil))
	if *quiet {
		logger.SetOutput(io.Discard)
		slogger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	// The hello line names the port really listened on, which differs from
	// the flag when it asked for port 0.
	_, actualPort, _ := net.SplitHostPort(ln.Addr().String())
	var key string
	var value []byte
	if reg.endpoints != "" {
		if key, value, err = reg.announcement(ln.Addr().(*net.TCPAddr)); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "server: %v\n", err)
			return 2
		}
	}
	var health demo.Health
	srv := &http.Server{
		Handler:           demo.Handler(actualPort, &health),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          logger,
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopToggle := toggleOnSignal(&health, logger)
	defer stopToggle()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Printf("listening on %s", ln.Addr())
	// Announced only now that connections are taken, so no relay learns
	// of a backend that cannot answer. Every way out withdraws it.
	withdraw := func() {}
	if reg.endpoints != "" {
		withdraw = reg.start(key, value, slogger)
		defer withdraw()
	}
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	// Out of etcd first, so relays stop sending new requests, then the
	// requests in flight are let finish.
	withdraw()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWindow)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "server: stopping: %v\n", err)
		return 1
	}
	return 0
}

// resolveAddr picks the listen address: addr when set, else all interfaces
// on port.
func resolveAddr(addr, port string) (string, error) {
	if addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("bad -addr %q: %w", addr, err)
		}
		return addr, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("bad port %q: want a number from 0 to 65535", port)
	}
	return ":" + strconv.Itoa(n), nil
}
