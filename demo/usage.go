package demo

// Usage describes the endpoints and switches of Handler, for -help output.
const Usage = `Endpoints (every path not listed answers like /):
  GET  /                   "Hello World from PORT server", text/plain
  GET  /health             200 "ok", or 503 "failing" while health is switched off
  ANY  /echo, /echo/...    JSON: method, path (with query), proto, host, headers,
                           body_length, remote_addr, and transfer_encoding and
                           trailers when the request had them
  GET  /download?size=N    N bytes, letters a to z repeating, with Content-Length;
                           add &chunked=1 to send them chunked instead
  ANY  /upload             reads the whole body, answers JSON {"bytes": N}
  POST /admin/health/fail  make /health answer 503
  POST /admin/health/ok    make /health answer 200 again

Query switches, on every path:
  delay=DURATION           wait before answering, a Go duration up to 5m (?delay=200ms)
  status=CODE              answer with this status code, 200 to 999 (?status=503)
`
