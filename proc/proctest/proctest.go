// Package proctest counts the processes a test started, to check that
// none outlives what it should.
package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Running counts the live processes (zombies aside) whose command line
// holds marker.
func Running(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(b), marker) && !strings.Contains(string(st), ") Z ") {
			n++
		}
	}
	return n
}

// Left waits up to wait for the processes with marker to be gone and
// returns how many are still running.
func Left(marker string, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		n := Running(marker)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Children lists this process's children whose environment holds
// variable (a "NAME=" prefix), from /proc: the workers, keepers or
// commands a test started, alive at one moment.
//
// Each thread lists the children it started, so the list is read file by
// file: a child seen in an early file may end, and another start, before
// a later file is read, and the two were never alive together. So every
// child seen is looked at again once the reading is done, and only those
// still alive are listed: each was alive when it was read, before the
// first of these second looks, and alive at its own look, after it, so
// all of them were alive together at the first look.
func Children(variable string) []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var seen []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			if env, _ := os.ReadFile(filepath.Join("/proc", f, "environ")); strings.Contains(string(env), variable+"=") {
				seen = append(seen, f)
			}
		}
	}
	var out []int
	for _, f := range seen {
		if st, err := os.ReadFile(filepath.Join("/proc", f, "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
			pid, _ := strconv.Atoi(f)
			out = append(out, pid)
		}
	}
	return out
}

// Most samples count every millisecond until the returned function is
// called, which returns the most it counted.
func Most(count func() int) (stop func() int) {
	quit, most := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-quit:
				most <- n
				return
			default:
			}
			n = max(n, count())
			time.Sleep(time.Millisecond)
		}
	}()
	return func() int { close(quit); return <-most }
}
