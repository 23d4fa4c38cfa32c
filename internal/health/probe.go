package health

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"relay/internal/backend"
)

// Probe checks one backend once and returns nil when it passes. ctx carries
// the check timeout and is cancelled when the checker stops; a probe must
// return promptly once it is done.
type Probe func(ctx context.Context, b *backend.Backend) error

// maxDrain bounds how much of a health response body is read. The body is
// drained so a backend that sends a 2xx head and then stalls fails the check,
// but a chatty status page should not cost more than this.
const maxDrain = 64 << 10

// newHTTPClient returns the client of HTTP probes. Probes are off the request
// path, so net/http is good enough; each probe dials afresh (no keep-alive)
// because a check should prove the backend still accepts connections, not
// that an old one is still open. Proxy settings from the environment are
// ignored: checks go straight to the backend, as traffic does.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            (&net.Dialer{KeepAlive: -1}).DialContext,
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 64 << 10,
		},
		// A redirect is an answer, not a pass: only 2xx counts.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// httpProbe returns a Probe that sends GET path to the backend's address with
// the Host header of its URL, as a client of the backend would.
func httpProbe(client *http.Client, path string) Probe {
	return func(ctx context.Context, b *backend.Backend) error {
		scheme := "http"
		if b.URL != nil && b.URL.Scheme == "https" {
			scheme = "https"
		}
		target := scheme + "://" + b.Addr + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return fmt.Errorf("health check %s: %w", target, err)
		}
		if b.URL != nil {
			req.Host = b.URL.Host
		}
		req.Header.Set("User-Agent", "relay-health-check")
		resp, err := client.Do(req)
		if err != nil {
			return err // *url.Error already names the method and target
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("health check GET %s: status %s", target, resp.Status)
		}
		if _, err := io.CopyN(io.Discard, resp.Body, maxDrain); err != nil && err != io.EOF {
			return fmt.Errorf("health check GET %s: reading body: %w", target, err)
		}
		return nil
	}
}

// tcpProbe passes when a connection to the backend's address opens.
func tcpProbe(ctx context.Context, b *backend.Backend) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", b.Addr)
	if err != nil {
		return err // *net.OpError already names the address
	}
	conn.Close()
	return nil
}
