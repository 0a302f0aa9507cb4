//go:build linux

package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the keeper in a group of its own and has the kernel
// send it SIGTERM when the thread that started it ends (loadout's end).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// becomeReaper makes the keeper the parent of every process its program
// orphans.
func becomeReaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// killTaken kills, with their groups, the processes the keeper took in
// (its children now, besides the program), until none is left.
func killTaken() {
	for range 50 {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			// Reap what died, so it is not counted again.
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// children are the keeper's child processes, from /proc.
func children() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
