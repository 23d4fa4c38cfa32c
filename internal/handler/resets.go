package handler

import (
	"context"
	"log/slog"
	"net"
	"sync"
)

// Rapid Reset (CVE-2023-44487): a client opens streams and cancels them at
// once, so the server starts work it never gets to finish. Go's server
// bounds the handlers such a client can keep running, but as long as they
// keep up it lets the connection live. relay, as Envoy does, closes a
// connection on which most streams end before their answer: once a client
// has opened resetMinStreams streams, if more than half of them were
// cancelled by the client before relay answered, the connection is closed.
const resetMinStreams = 500

// resets counts one HTTP/2 connection's streams and those its client
// cancelled early.
type resets struct {
	conn net.Conn
	log  *slog.Logger

	mu              sync.Mutex
	streams, cancel int
	closed          bool
}

type resetsKey struct{}

// withResets gives each connection its counters (http.Server.ConnContext).
func withResets(log *slog.Logger) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, resetsKey{}, &resets{conn: c, log: log})
	}
}

// streamEnded counts a stream of the connection ctx belongs to; cancelled
// says the client cancelled it before relay answered. It closes the
// connection of a client that cancels most of what it opens.
func streamEnded(ctx context.Context, cancelled bool) {
	rs, _ := ctx.Value(resetsKey{}).(*resets)
	if rs == nil {
		return // not a connection of Server
	}
	rs.mu.Lock()
	rs.streams++
	if cancelled {
		rs.cancel++
	}
	abusive := !rs.closed && rs.streams >= resetMinStreams && 2*rs.cancel > rs.streams
	if abusive {
		rs.closed = true
	}
	streams, cancel := rs.streams, rs.cancel
	rs.mu.Unlock()
	if abusive {
		if rs.log != nil {
			rs.log.Warn("HTTP/2 client cancelled most of its streams before their answers (Rapid Reset); connection closed",
				"client", rs.conn.RemoteAddr().String(), "streams", streams, "cancelled", cancel)
		}
		rs.conn.Close()
	}
}
