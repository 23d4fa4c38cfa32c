package supervisor

import (
	"log/slog"
	"syscall"

	"relay/internal/fds"
)

// RaiseFileLimit lifts the soft open-file limit to the hard limit, as
// nginx's worker_rlimit_nofile does, and returns the process's descriptor
// budget under it (package fds): everything a client can make relay hold
// takes a place in it, so relay refuses work before the system refuses it
// a descriptor. It warns when the budget cannot hold the connection cap:
// a client connection costs up to two places, its own and the upstream
// connection it is forwarded on (a WebSocket tunnel too; an HTTP/2
// connection up to one per open stream that waits on its backend).
func RaiseFileLimit(log *slog.Logger, maxConns int) *fds.Budget {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit; descriptors are not budgeted", "err", err)
		return nil
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open-file limit", "err", err, "limit", lim.Cur)
		} else {
			lim = raised
		}
	}
	limit := int(min(lim.Cur, 1<<30))
	b := fds.ForLimit(limit)
	if need := 2 * int64(maxConns); maxConns > 0 && b.Limit() < need {
		log.Warn("open-file limit is too low for max_connections: past the descriptor budget relay refuses new connections and requests; raise it (ulimit -n, LimitNOFILE) or lower max_connections",
			"limit", limit, "budget", b.Limit(), "max_connections", maxConns, "needed", need+int64(fds.Reserve(limit)))
	}
	return b
}
