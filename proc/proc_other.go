//go:build !linux

package proc

import "syscall"

// sysProcAttr puts the keeper in a group of its own; without a
// parent-death signal, the keeper notices loadout's end by its parent.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func becomeReaper() error { return nil }

func killTaken() {}
