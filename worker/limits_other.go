//go:build !linux

package worker

import "syscall"

const (
	memEnv    = "LOADOUT_WORKER_MEMORY_MB"
	cpuEnv    = "LOADOUT_WORKER_CPU_SECONDS"
	parentEnv = "LOADOUT_WORKER_PARENT"
)

// sysProcAttr puts a worker in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// setLimits sets no limit where the platform has no RLIMIT_AS; the
// wall-clock limit still holds.
func setLimits() error { return nil }
