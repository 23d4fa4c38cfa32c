package supervisor

import (
	"log/slog"
	"syscall"
)

// RaiseFileLimit lifts the soft open-file limit to the hard limit, as
// nginx's worker_rlimit_nofile does, and warns when even that cannot hold
// the connection cap. Every client connection costs relay at most two
// descriptors, its own and the upstream connection it is forwarded on (a
// WebSocket tunnel too: it copies between the two sockets, no pipes), plus
// headroom for idle pooled connections, listeners, health checks and logs.
func RaiseFileLimit(log *slog.Logger, maxConns int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("cannot raise the open-file limit", "err", err, "limit", lim.Cur)
		}
	}
	need := uint64(2*maxConns + 1024)
	if maxConns > 0 && uint64(lim.Cur) < need {
		log.Warn("open-file limit is too low for max_connections; raise it (ulimit -n) or lower max_connections",
			"limit", lim.Cur, "max_connections", maxConns, "needed", need)
	}
}
