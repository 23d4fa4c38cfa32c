package logging_test

import (
	"net/netip"
	"os"
	"time"

	"relay/internal/logging"
)

// The proxy fills one Entry per request and hands it to Log; Close at
// shutdown writes whatever is still buffered.
func ExampleAccessLog() {
	access := logging.NewAccessLog(os.Stdout)
	access.Log(&logging.Entry{
		Time:     time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("", 3600)),
		Client:   netip.MustParseAddrPort("203.0.113.9:51234"),
		Method:   []byte("GET"),
		Path:     []byte("/api/items?id=42"),
		Proto:    "HTTP/2.0",
		TLS:      true,
		Status:   200,
		Backend:  "http://localhost:8001",
		Pool:     "default",
		Route:    "api",
		Duration: 734 * time.Microsecond,
		BytesOut: 5120,

		UserAgent:        []byte("curl/8.5.0"),
		RequestID:        []byte("5f0c3e1a9b2d4c67000000000000002a"),
		UpstreamConnect:  0, // a pooled connection
		UpstreamResponse: 612 * time.Microsecond,
	})
	if err := access.Close(); err != nil {
		panic(err)
	}
	// Output:
	// {"time":"2025-03-14T15:09:26.535897+01:00","level":"INFO","msg":"access","client":"203.0.113.9:51234","method":"GET","path":"/api/items?id=42","proto":"HTTP/2.0","tls":true,"status":200,"backend":"http://localhost:8001","pool":"default","route":"api","duration_ms":0.734,"bytes_in":0,"bytes_out":5120,"user_agent":"curl/8.5.0","referer":"","request_id":"5f0c3e1a9b2d4c67000000000000002a","upstream_connect_ms":0,"upstream_response_ms":0.612}
}
