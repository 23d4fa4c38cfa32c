package health

import (
	"context"
	"net"

	"relay/internal/backend"
)

// Probe checks one backend once and returns nil when it passes. ctx carries
// the check timeout and is cancelled when the checker stops; a probe must
// return promptly once it is done.
type Probe func(ctx context.Context, b *backend.Backend) error

// dialer opens the connections of both probe types; it is never modified.
// TCP keep-alive is off: a probe's connection lives for milliseconds, and
// turning keep-alive on costs several setsockopt calls per dial.
var dialer = net.Dialer{KeepAlive: -1}

// tcpProbe passes when a connection to the backend's address opens.
func tcpProbe(ctx context.Context, b *backend.Backend) error {
	conn, err := dialer.DialContext(ctx, "tcp", b.Addr)
	if err != nil {
		return err // *net.OpError already names the address
	}
	conn.Close()
	return nil
}
