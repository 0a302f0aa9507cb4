package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkWritable reports, before SQLite opens path, whether this process
// can write where SQLite will: in path's directory (the file is created
// there on first start, and the -wal and -shm files beside it on every
// start) and to the file and those companions when they exist. Without
// it SQLite opens a file it cannot write read-only, and the first write
// fails with "attempt to write a readonly database".
//
// The directory is tested with a real write, a file created and removed,
// so the answer is the kernel's whatever the cause: permission bits,
// ownership, ACLs, a read-only mount, a user namespace; root passes
// where root can write. The existing files are tested with access(2) for
// the effective user instead of being opened: closing any descriptor of
// a SQLite file drops the POSIX locks this process holds on it, and
// another connection of this process may have it open.
//
// A directory that does not exist yet is created, as Open would. A
// failure is an error naming store.path, the user, and the fix.
func checkWritable(path string) error {
	if path == "" || path == ":memory:" {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("store.path: the directory %s does not exist and cannot be made on a file system mounted read-only (%w)", dir, err)
		}
		if denied(err) {
			return fmt.Errorf("store.path: the directory %s does not exist and %s cannot create it: "+
				"create it writable by that user (chown %s), or, in a container, mount a volume there (%w)",
				dir, whoAmI(), chown(dir), err)
		}
		return fmt.Errorf("store.path: create the directory of %s: %w", path, err)
	}
	probe, err := os.CreateTemp(dir, ".loadout-write-check-*")
	if err != nil {
		if errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("store.path: the directory %s is on a file system mounted read-only: mount it read-write (%w)", dir, err)
		}
		if denied(err) {
			return fmt.Errorf("store.path: the directory %s is not writable by %s: "+
				"make it writable by that user (chown %s), or, in a container, run it with --user set to the directory's owner (%w)",
				dir, whoAmI(), chown(dir), err)
		}
		return fmt.Errorf("store.path: write in the directory of %s: %w", path, err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("store.path: remove %s: %w", probe.Name(), err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		err := fileWritable(name)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("store.path: %s is on a file system mounted read-only: mount it read-write (%w)", name, err)
		}
		if denied(err) {
			return fmt.Errorf("store.path: %s is not writable by %s: "+
				"make it writable by that user (chown %s), or, in a container, run it with --user set to the file's owner (%w)",
				name, whoAmI(), chown(name), err)
		}
		return fmt.Errorf("store.path: check %s: %w", name, err)
	}
	return nil
}

// denied reports whether err means the process may not write there.
func denied(err error) bool { return errors.Is(err, fs.ErrPermission) }

// whoAmI names the user this process writes as.
func whoAmI() string { return fmt.Sprintf("uid %d, the user loadout runs as", os.Geteuid()) }

// chown is the command that gives name to this process's user and group.
func chown(name string) string { return fmt.Sprintf("%d:%d %s", os.Geteuid(), os.Getegid(), name) }
