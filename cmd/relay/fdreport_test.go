package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// tcpStates names the states of /proc/net/tcp's st column.
var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// tcpSocket is one line of /proc/PID/net/tcp or tcp6.
type tcpSocket struct {
	local, remote int // ports
	state         string
}

// tcpSockets reads the TCP sockets of pid's network namespace by inode.
func tcpSockets(pid int) map[string]tcpSocket {
	out := map[string]tcpSocket{}
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			out[f[9]] = tcpSocket{local: procPort(f[1]), remote: procPort(f[2]), state: cmp.Or(tcpStates[f[3]], f[3])}
		}
	}
	return out
}

// procPort is the port of an ADDR:PORT of /proc/net/tcp, PORT in hex.
func procPort(addr string) int {
	_, hex, _ := strings.Cut(addr, ":")
	n, _ := strconv.ParseInt(hex, 16, 32)
	return int(n)
}

// maxFDKinds bounds the kinds of descriptors fdReport lists per process.
const maxFDKinds = 24

// fdTally is what one process's descriptors are: how many of each kind
// (fdKind), and of the TCP connections the process opened, how many go
// to each port.
type fdTally struct {
	pid, total int
	err        error
	kinds      map[string]int
	to         map[int]int
}

// tallyFDs reads the descriptors of pid.
func tallyFDs(pid int) fdTally {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	ft := fdTally{pid: pid, total: len(es), err: err, kinds: map[string]int{}, to: map[int]int{}}
	socks := tcpSockets(pid)
	listening := map[int]bool{}
	for _, s := range socks {
		if s.state == "LISTEN" {
			listening[s.local] = true
		}
	}
	for _, e := range es {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		kind, to := fdKind(target, socks, listening)
		ft.kinds[kind]++
		if to != 0 {
			ft.to[to]++
		}
	}
	return ft
}

// connsTo counts the TCP connections pids opened to port, in any state.
func connsTo(pids []int, port int) int {
	n := 0
	for _, pid := range pids {
		n += tallyFDs(pid).to[port]
	}
	return n
}

// fdReport says what the descriptors of pids are, process by process,
// counted by kind: TCP listeners by port, accepted connections by the
// listener's port (the clients'), connections the process opened by the
// port they go to (backends', the supervisor's), each with its TCP
// state; pipes, event polls and files. Its length is bounded (maxFDKinds
// kinds a process), for test failures to show what relay held.
func fdReport(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		ft := tallyFDs(pid)
		if ft.err != nil {
			fmt.Fprintf(&b, "\npid %d: %v", pid, ft.err)
			continue
		}
		type kind struct {
			name string
			n    int
		}
		var ks []kind
		for name, n := range ft.kinds {
			ks = append(ks, kind{name, n})
		}
		slices.SortFunc(ks, func(a, b kind) int { return cmp.Or(b.n-a.n, strings.Compare(a.name, b.name)) })
		fmt.Fprintf(&b, "\npid %d: %d descriptors", pid, ft.total)
		for i, k := range ks {
			if i == maxFDKinds {
				fmt.Fprintf(&b, "\n  ... %d kinds more", len(ks)-i)
				break
			}
			fmt.Fprintf(&b, "\n  %4d %s", k.n, k.name)
		}
	}
	return b.String()
}

// fdKind names what one descriptor, whose link reads target, is, and
// for a TCP connection the process opened, the port it goes to.
func fdKind(target string, socks map[string]tcpSocket, listening map[int]bool) (string, int) {
	inode, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		if strings.HasPrefix(target, "pipe:") {
			return "pipe", 0
		}
		return target, 0
	}
	s, ok := socks[strings.TrimSuffix(inode, "]")]
	switch {
	case !ok:
		return "socket, not TCP (unix, or closed)", 0
	case s.state == "LISTEN":
		return fmt.Sprintf("tcp listening on :%d", s.local), 0
	case listening[s.local]:
		return fmt.Sprintf("tcp accepted on :%d %s", s.local, s.state), 0
	default:
		return fmt.Sprintf("tcp to :%d %s", s.remote, s.state), s.remote
	}
}
