// Package control is relay's control plane: the one home of what must be
// global however many processes serve. It holds the configuration
// generation, every pool's membership, the backends it checks (their
// health, breakers and operator state are the truth every process
// follows), each serving process's channel, and what the processes
// counted. Operator actions, discovery and reloads change relay here, and
// every process follows through its channel.
//
// It sits beside package supervisor, the process mechanics (serving
// processes, their sockets, restarts, limits, cpu_affinity). The
// supervisor declares the little it needs of the control
// (supervisor.Control: attach and detach a process's channel, relay's own
// addresses) and never imports this package.
//
// The channel's transport and its messages (supervisor.Channel,
// supervisor.Message and what messages carry) stay in package supervisor,
// and this package imports them. A serving process and its supervisor
// must agree on one wire format, and the supervisor reads the first
// message itself (the configuration, which a process needs before any of
// the control plane runs in it), so the format has one definition, next
// to the channel that carries it; what the messages mean, and what is
// done with them, is here.
//
// The serving side is here too (follow.go): Follow applies the control's
// messages to a serving process's backends, and ReportBreaker sends a
// breaker's change up for the control to decide. With one process the
// control runs in that process and attaches it over the same channel
// (Control.Local), so relay behaves the same however many processes
// serve.
package control
