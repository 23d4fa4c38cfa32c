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
	limit, readErr, raiseErr := raiseFileLimit()
	if readErr != nil {
		log.Warn("cannot read the open-file limit; descriptors are not budgeted", "err", readErr)
		return nil
	}
	if raiseErr != nil {
		log.Warn("cannot raise the open-file limit", "err", raiseErr, "limit", limit)
	}
	b := fds.ForLimit(limit)
	if need := 2 * int64(maxConns); maxConns > 0 && b.Limit() < need {
		log.Warn("open-file limit is too low for max_connections: past the descriptor budget relay refuses new connections and requests; raise it (ulimit -n, LimitNOFILE) or lower max_connections",
			"limit", limit, "budget", b.Limit(), "max_connections", maxConns, "needed", need+int64(fds.Reserve(limit)))
	}
	return b
}

// FitConnections is maxConns, lowered to what the open-file limit (raised
// as RaiseFileLimit raises it) can hold, so that RaiseFileLimit does not
// warn. It is for relay -demo, whose connection cap nobody chose; a cap an
// operator set is kept, and warned about.
func FitConnections(maxConns int) int {
	limit, readErr, _ := raiseFileLimit()
	if readErr != nil {
		return maxConns
	}
	return max(1, min(maxConns, int(fds.ForLimit(limit).Limit()/2)))
}

// raiseFileLimit lifts the soft open-file limit to the hard one, and
// returns the limit in force: the hard one, or the soft one when it could
// not be raised (raiseErr).
func raiseFileLimit() (limit int, readErr, raiseErr error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err, nil
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			raiseErr = err
		} else {
			lim = raised
		}
	}
	return int(min(lim.Cur, 1<<30)), nil, raiseErr
}
