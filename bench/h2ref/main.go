// Command h2ref is Go's own HTTP/2 server with nothing in front, over TLS
// on 127.0.0.1:18443 and as h2c on 127.0.0.1:18444, answering every request
// itself: the reference h2spec.sh holds relay's HTTP/2 front door against.
// Its certificate and key are cert.pem and key.pem in the working directory.
package main

import (
	"io"
	"net/http"
)

func main() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "hello\n")
	})
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	go (&http.Server{Addr: "127.0.0.1:18444", Handler: h, Protocols: &p}).ListenAndServe()
	(&http.Server{Addr: "127.0.0.1:18443", Handler: h}).ListenAndServeTLS("cert.pem", "key.pem")
}
