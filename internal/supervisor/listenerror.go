package supervisor

import "fmt"

// ListenError is a client listener the supervisor could not open for its
// serving processes: Key is the setting that names it (listen or
// tls_listen), Addr its address. relay's command line turns it into what
// to type instead, as it does when it listens alone.
type ListenError struct {
	Key, Addr string
	Err       error
}

func (e *ListenError) Error() string { return fmt.Sprintf("%s: %v", e.Key, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }
