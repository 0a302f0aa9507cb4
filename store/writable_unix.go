//go:build unix

package store

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// fileWritable reports whether this process's effective user may write
// to the file name, without opening it.
func fileWritable(name string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, name, unix.W_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "access", Path: name, Err: err}
	}
	return nil
}
