//go:build !unix

package store

import (
	"io/fs"
	"os"
)

// fileWritable reports whether the file name is marked writable, without
// opening it.
func fileWritable(name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return &fs.PathError{Op: "access", Path: name, Err: fs.ErrPermission}
	}
	return nil
}
