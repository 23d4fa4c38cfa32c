package supervisor

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"

	"relay/internal/config"
)

// soReusePort is SO_REUSEPORT on Linux; the syscall package lacks it.
const soReusePort = 0xf

// CheckPlatform reports whether this system can run cfg's process model.
// Linux runs all of it.
func CheckPlatform(*config.Config) error { return nil }

// dieWithParent makes a serving process get SIGTERM, and so drain, when
// the supervisor dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// reusePortSockets binds n listening sockets to addr that share it through
// SO_REUSEPORT and returns them as files for children to inherit, with the
// address they are bound to. A plain bind comes first, so an address that is
// already in use, by anyone, is refused rather than silently shared; it also
// resolves port 0. With cpus, socket i asks for the connections arriving on
// CPU cpus[i] (SO_INCOMING_CPU).
func reusePortSockets(addr string, n int, cpus []int) ([]*os.File, string, error) {
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	addr = probe.Addr().String()
	probe.Close()

	files := make([]*os.File, 0, n)
	for i := range n {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
				if serr == nil && cpus != nil {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soIncomingCPU, cpus[i%len(cpus)])
					if serr != nil {
						serr = fmt.Errorf("cpu_affinity: SO_INCOMING_CPU: %w", serr)
					}
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			closeFiles(files)
			return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
		}
		f, err := ln.(*net.TCPListener).File() // a duplicate descriptor
		ln.Close()
		if err != nil {
			closeFiles(files)
			return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
		}
		files = append(files, f)
	}
	return files, addr, nil
}
