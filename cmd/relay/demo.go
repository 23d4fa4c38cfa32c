package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"relay/demo"
)

// demoConfig is the configuration -demo runs when no -config is given.
//
//go:embed demo.yml
var demoConfig []byte

// demoPorts are where -demo starts its backends; demo.yml points at them.
var demoPorts = []string{"8001", "8002", "8003"}

// startDemoBackends serves the demo backend on 127.0.0.1:8001-8003 inside
// this process and returns a function that stops them.
func startDemoBackends(log *slog.Logger) (stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range servers {
			s.Shutdown(ctx)
		}
	}
	for _, port := range demoPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			stop()
			// No flag moves them: demo.yml names these ports.
			return nil, &listenError{err: err, msg: fmt.Sprintf("demo backend on 127.0.0.1:%s: %s; relay -demo runs its backends on 127.0.0.1:%s-%s, so stop what holds the port (another relay -demo, or cmd/server)",
				port, problem(err), demoPorts[0], demoPorts[len(demoPorts)-1])}
		}
		s := &http.Server{Handler: demo.Handler(port, nil), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("demo backend stopped", "port", port, "err", err)
			}
		}()
		log.Info("demo backend listening", "addr", ln.Addr().String())
	}
	return stop, nil
}
