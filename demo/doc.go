// Package demo is the behaviour of relay's demo and test backend: a small
// HTTP server that says which port answered and can be made slow, failing or
// unhealthy on demand. cmd/server runs it as a process; relay -demo runs three
// in-process; integration tests run it behind relay to watch balancing,
// failover, streaming and header handling from the backend's side.
//
// It uses the standard library only and knows nothing of relay's internals.
//
// Endpoints (every path not listed answers like /):
//
//	GET  /                   "Hello World from PORT server\n", text/plain
//	GET  /health             200 "ok\n", or 503 "failing\n" while health is switched off
//	ANY  /echo, /echo/...    JSON: method, path (with query), proto, host, headers,
//	                         body_length, remote_addr, and transfer_encoding and
//	                         trailers when the request had them
//	GET  /download?size=N    N bytes, letters a to z repeating (byte i is 'a'+i%26),
//	                         with Content-Length; &chunked=1 sends them chunked
//	ANY  /upload             reads the whole body and answers JSON {"bytes": N}
//	POST /admin/health/fail  /health answers 503 from now on
//	POST /admin/health/ok    /health answers 200 again
//
// Query switches, on every path:
//
//	delay=DURATION  wait before answering; a Go duration up to 5m, such as 200ms
//	status=CODE     answer with this status code (200 to 999) instead of the usual one
//
// Bodies are streamed both ways, so a 1 GiB upload or download costs no more
// memory than a small one.
package demo
