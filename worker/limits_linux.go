//go:build linux

package worker

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The limits, passed to the worker in its environment.
const (
	memEnv = "LOADOUT_WORKER_MEMORY_MB"
	cpuEnv = "LOADOUT_WORKER_CPU_SECONDS"
	// parentEnv is the pid of the loadout that started the worker.
	parentEnv = "LOADOUT_WORKER_PARENT"
)

// sysProcAttr puts a worker in a process group of its own, killed with
// it on a timeout, and kills it when loadout ends, however it ends.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// setLimits sets, in the worker, the limits its environment names: the
// address space it has now plus the memory allowed (the Go runtime and
// the binary already take some), and the processor time.
func setLimits() error {
	// Exit if loadout ended before the worker could be told to die
	// with it.
	if strconv.Itoa(os.Getppid()) != os.Getenv(parentEnv) {
		os.Exit(3)
	}
	mb, err := strconv.Atoi(os.Getenv(memEnv))
	if err != nil || mb <= 0 {
		return fmt.Errorf("%s is not set", memEnv)
	}
	secs, err := strconv.Atoi(os.Getenv(cpuEnv))
	if err != nil || secs <= 0 {
		return fmt.Errorf("%s is not set", cpuEnv)
	}
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return err
	}
	pages, err := strconv.ParseUint(string(bytes.Fields(statm)[0]), 10, 64)
	if err != nil {
		return err
	}
	as := pages*uint64(os.Getpagesize()) + uint64(mb)<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: as, Max: as}); err != nil {
		return fmt.Errorf("setrlimit AS: %w", err)
	}
	// The soft limit sends SIGXCPU, the hard one a second later SIGKILL.
	return unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(secs), Max: uint64(secs) + 1})
}
