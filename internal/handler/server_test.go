package handler

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// A connection handed over just as Shutdown starts still gets GOAWAY, in
// every one of many rounds racing the two: none is left to be cut off
// when shutdown_timeout runs out.
func TestShutdownSendsGoAwayToAConnectionHandedOverAsItStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	missed := 0
	for round := 0; round < rounds; round++ {
		s := NewServer(New(core.New(core.Config{}), core.BodyTime{}), Limits{MaxConcurrentStreams: 10, IdleTimeout: time.Minute, HeaderTimeout: ioTimeout}, nil)
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(client, http2.ClientPreface)
		fr := http2.NewFramer(client, client)
		fr.WriteSettings()

		ended := make(chan struct{})
		go s.ServeConn(server, func() { close(ended) })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		stopped := make(chan struct{})
		go func() { s.Shutdown(ctx); close(stopped) }()

		client.SetReadDeadline(time.Now().Add(ioTimeout))
		goaway := false
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				break
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				goaway = true
				break
			}
		}
		if !goaway {
			missed++
		}
		client.Close()
		<-stopped
		<-ended
		cancel()
	}
	if missed > 0 {
		t.Errorf("%d of %d connections handed over as Shutdown started got no GOAWAY", missed, rounds)
	}
}
