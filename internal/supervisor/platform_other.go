//go:build !linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"relay/internal/config"
)

// errLinuxOnly is what the parts of the process model that need Linux
// report elsewhere; CheckPlatform refuses such configurations first.
var errLinuxOnly = errors.New("needs Linux")

// CheckPlatform reports whether this system can run cfg's process model:
// several serving processes need Linux's SO_REUSEPORT balancing and
// parent-death signal, and cpu_affinity its scheduler and SO_INCOMING_CPU.
func CheckPlatform(cfg *config.Config) error {
	if n := ProcessCount(cfg); n > 1 {
		return fmt.Errorf("processes: %d needs Linux; this is %s: use processes: 1 (workers sets the threads of the one process)", n, runtime.GOOS)
	}
	if cfg.CPUAffinity {
		return fmt.Errorf("cpu_affinity needs Linux; this is %s: turn it off", runtime.GOOS)
	}
	return nil
}

func dieWithParent() *syscall.SysProcAttr { return nil }

func reusePortSockets(string, int, []int) ([]*os.File, string, error) {
	return nil, "", errLinuxOnly
}

func AllowedCPUs() ([]int, error)                  { return nil, errLinuxOnly }
func OnCPU(int, func() error) (bindErr, err error) { return errLinuxOnly, errLinuxOnly }
func KernelAtLeast(int, int) bool                  { return false }
