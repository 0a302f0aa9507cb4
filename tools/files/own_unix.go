//go:build unix

package files

import (
	"io/fs"
	"os"
	"syscall"
)

// own refuses a file that is not the chat's alone: one with another hard
// link (a command may have linked another chat's file in, or a file of
// the server's) or one on another device than the workspace (a mount).
// os.Root keeps paths inside the workspace; this keeps inodes there.
func own(root *os.Root, st fs.FileInfo) error {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if s.Nlink > 1 {
		return errNotOwn
	}
	rs, err := root.Stat(".")
	if err != nil {
		return err
	}
	if r, ok := rs.Sys().(*syscall.Stat_t); ok && r.Dev != s.Dev {
		return errNotOwn
	}
	return nil
}
