// Package supervisor is relay's process model: several serving processes
// under one supervisor, as nginx runs worker_processes, and the channel
// that makes them behave as one relay.
//
// With processes: N (N > 1) the relay the user started becomes a supervisor
// that serves nothing itself (Run). It binds N listening sockets to the
// listen address with SO_REUSEPORT, so the kernel spreads new connections
// over them by a hash of the client's address and port, and starts N copies
// of its own executable with the same arguments. Each copy (Inherited)
// gets one socket as descriptor 3, a pipe to say "serving" on as 4, its end
// of a channel to the supervisor as 5, and pipes for its standard output
// and error, and serves on its own: its own Go runtime, connection pools
// and balancer state.
//
// Why processes and not only threads: relay's engine spends most of its CPU
// in system calls, and one Go process with one scheduler thread does that
// most cheaply; with two threads the runtime spends CPU waking and spinning
// the second one. One single-threaded process per core keeps the cheap
// shape and still uses every core (bench/history.md, "Processes or
// threads", has the figures).
//
// The supervisor keeps the sockets open, so connections that arrive while a
// serving process restarts wait in that socket's queue instead of failing.
// It owns the log file too: serving processes write JSON lines to their
// standard output, and the supervisor copies them to the log in whole
// lines, so lines never interleave and size rotation has one writer.
//
// The channel (a Unix socket pair, one JSON message per line, Channel)
// carries typed messages both ways (message.go is the wire format, which
// both ends are built from). Down: the configuration the supervisor
// loaded (first, so a process restarted after a crash runs what the others
// run, not a file edited since), membership, health and operator state.
// Up: counters, every second and at exit, and breaker changes. What the
// messages mean is the control plane's (package control): it runs beside
// the supervisor, holds what must be global, and attaches to every
// process the supervisor starts through the Control interface, so this
// package never imports it. A process whose queue of messages overflows,
// or that sends what cannot be read, loses its channel, stops and is
// started afresh, which resynchronises it.
//
// Several processes and cpu_affinity need Linux (SO_REUSEPORT balancing,
// the parent-death signal, sched_setaffinity, SO_INCOMING_CPU);
// CheckPlatform refuses them elsewhere with a clear error.
package supervisor
