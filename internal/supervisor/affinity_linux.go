package supervisor

// CPU affinity for serving processes (cpu_affinity: true).
//
// With several processes on SO_REUSEPORT sockets the kernel picks a socket
// for each new connection by a hash of its addresses and ports, so any
// process may serve a client whose packets the kernel handles on another
// core, and each client's connections are spread over every process. With
// cpu_affinity the supervisor binds serving process i to one core and sets
// SO_INCOMING_CPU on its socket to that core; since Linux 6.2 the kernel then
// hands a new connection to the socket of the core its handshake arrived on,
// falling back to the hash when no socket matches. A connection's packets and
// its process then share a core. On the 2-core benchmark machine, where wrk's
// two threads connect from both cores, each wrk thread's connections then go
// to one process; in two peers.sh runs that lowered p99 at 100 connections
// (4.2 and 5.7 ms against 6.4 and 6.7) but not at 400 (bench/history.md,
// "Tail latency").
//
// The catch: connections are spread only as widely as their packets are. A
// network card with one receive queue, or a local client with one thread,
// lands every handshake on one core and so every connection on one process.
// That is why it is a setting and off by default, like nginx's
// worker_cpu_affinity.
//
// The binding is inherited: the supervisor starts process i from a thread
// bound to its core, so every thread the child's runtime creates is bound to
// it from the start, and Go's runtime sees one core (GOMAXPROCS 1).

import (
	"fmt"
	"math/bits"
	"runtime"
	"syscall"
	"unsafe"
)

// soIncomingCPU is SO_INCOMING_CPU on Linux; the syscall package lacks it.
const soIncomingCPU = 49

// cpuSet is the kernel's cpu_set_t for up to 1,024 CPUs.
type cpuSet [16]uint64

// AllowedCPUs lists the CPUs the calling thread may run on, in order.
func AllowedCPUs() ([]int, error) {
	s, err := threadAffinity()
	if err != nil {
		return nil, err
	}
	var cpus []int
	for w, word := range s {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			cpus = append(cpus, w*64+b)
			word &^= 1 << b
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("no CPU in the affinity mask")
	}
	return cpus, nil
}

// threadAffinity reads the calling thread's affinity mask.
func threadAffinity() (cpuSet, error) {
	var s cpuSet
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(s), uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return s, fmt.Errorf("sched_getaffinity: %w", e)
	}
	return s, nil
}

// setThreadAffinity sets the calling thread's affinity mask.
func setThreadAffinity(s *cpuSet) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(*s), uintptr(unsafe.Pointer(s)))
	if e != 0 {
		return fmt.Errorf("sched_setaffinity: %w", e)
	}
	return nil
}

// OnCPU runs start on a thread bound to cpu, so a process it starts is bound
// to cpu too, and then restores the thread's binding. If the thread cannot
// be bound (the CPU has left the set relay may use since it started), start
// runs unbound and bindErr says why: a process that serves unbound is better
// than one that never comes back while its socket takes connections.
func OnCPU(cpu int, start func() error) (bindErr, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // not left locked: the thread must live on (Pdeathsig)
	old, err := threadAffinity()
	if err != nil {
		return err, start()
	}
	var one cpuSet
	one[cpu/64] = 1 << (cpu % 64)
	if err := setThreadAffinity(&one); err != nil {
		return fmt.Errorf("binding to CPU %d: %w", cpu, err), start()
	}
	defer setThreadAffinity(&old)
	return nil, start()
}

// KernelAtLeast reports whether the running kernel is major.minor or newer.
func KernelAtLeast(major, minor int) bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	var ma, mi int
	fmt.Sscanf(string(b), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}
