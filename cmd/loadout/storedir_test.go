package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// imageUser is the user the container image runs as (Dockerfile: USER).
const imageUser = 65532

// A store directory loadout cannot write stops it at start, before SQLite
// opens the file read-only and fails on the first write with "attempt to
// write a readonly database": the error names store.path, the user and
// the fix. So does a store file it cannot write in a directory it can.
//
// Permission bits do not stop root, so a test run as root runs loadout
// as the image's user, 65532, on a directory root owns: the case of a
// root-owned volume at /data. Run as anyone else, it makes the directory
// (or the file) read-only for itself.
func TestStoreNotWritableStopsTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	root := os.Geteuid() == 0
	base := t.TempDir()
	// As root the child runs as another user: it must reach the
	// directories and the binary.
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "loadout.test")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := linkOrCopy(exe, bin); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if root {
		uid, gid = imageUser, imageUser
	}
	start := func(dbPath string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=tools", "HOME="+base,
			"LOADOUT_LLM_API_KEY=sk-test", "LOADOUT_STORE_PATH="+dbPath)
		cmd.Dir = base
		if root {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUser, Gid: imageUser}}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			if errors.Is(err, syscall.EPERM) {
				t.Skipf("cannot start a process as uid %d here: %v", imageUser, err)
			}
			t.Fatal(err)
		}
		err := cmd.Wait()
		return out.String(), err
	}
	// mine makes path belong to the user the child runs as.
	mine := func(path string) {
		t.Helper()
		if root {
			if err := os.Chown(path, imageUser, imageUser); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantRefused := func(out string, err error, what string) {
		t.Helper()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("%s: exit %v, want status 1; output:\n%s", what, err, out)
		}
		for _, want := range []string{"loadout: store.path: ", what + fmt.Sprintf(" is not writable by uid %d, the user loadout runs as", uid),
			fmt.Sprintf("(chown %d:%d ", uid, gid), "run it with --user"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the error lacks %q:\n%s", what, want, out)
			}
		}
		if strings.Contains(out, "readonly database") {
			t.Errorf("%s: SQLite got to open the file:\n%s", what, out)
		}
	}

	// A directory it can write: the control, it starts.
	good := filepath.Join(base, "good")
	if err := os.Mkdir(good, 0o755); err != nil {
		t.Fatal(err)
	}
	mine(good)
	if out, err := start(filepath.Join(good, "loadout.db")); err != nil || !strings.Contains(out, "core") {
		t.Fatalf("a writable directory: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(good, ".loadout-write-check*")); len(left) > 0 {
		t.Errorf("the check left %v behind", left)
	}

	// A directory it cannot write.
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if !root {
		if err := os.Chmod(data, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(data, 0o755) })
		if err := os.WriteFile(filepath.Join(data, "probe"), nil, 0o600); err == nil {
			t.Skip("this process writes in a directory of mode 0555 though not root")
		}
	}
	out, err := start(filepath.Join(data, "loadout.db"))
	wantRefused(out, err, "the directory "+data)
	if _, err := os.Stat(filepath.Join(data, "loadout.db")); err == nil {
		t.Error("the database file was made in the directory")
	}

	// A store file it cannot write, in a directory it can.
	own := filepath.Join(base, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	mine(own)
	db := filepath.Join(own, "loadout.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !root {
		if err := os.Chmod(db, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	out, err = start(db)
	wantRefused(out, err, db)
}

// linkOrCopy makes dst the file src, linked when both are on one file
// system, copied otherwise, executable by anyone.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return os.Chmod(dst, 0o755)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
