package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The check answers as the kernel does: it refuses a directory or a file
// this process cannot write, and passes one it can, whoever runs it (root
// writes in a directory of mode 0555). It leaves nothing behind.
func TestCheckWritableAgreesWithTheKernel(t *testing.T) {
	if err := checkWritable(":memory:"); err != nil {
		t.Fatalf(":memory:: %v", err)
	}
	base := t.TempDir()
	fresh := filepath.Join(base, "new", "dir", "loadout.db")
	if err := checkWritable(fresh); err != nil {
		t.Fatalf("a directory to create: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Dir(fresh)); len(left) > 0 {
		t.Errorf("the check left %s behind", left[0].Name())
	}

	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	probe := filepath.Join(ro, "probe")
	kernel := os.WriteFile(probe, nil, 0o600)
	os.Remove(probe)
	err := checkWritable(filepath.Join(ro, "loadout.db"))
	if (err == nil) != (kernel == nil) {
		t.Fatalf("a directory of mode 0555: the check says %v, a write says %v", err, kernel)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "store.path: the directory "+ro+" is not writable by uid ") {
		t.Errorf("the error: %v", err)
	}

	file := filepath.Join(base, "loadout.db")
	for _, name := range []string{file, file + "-wal"} {
		if err := os.WriteFile(name, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		f, kernel := os.OpenFile(name, os.O_WRONLY, 0)
		if kernel == nil {
			f.Close()
		}
		err := checkWritable(file)
		if (err == nil) != (kernel == nil) {
			t.Fatalf("%s of mode 0444: the check says %v, a write says %v", name, err, kernel)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "store.path: "+name+" is not writable by uid ") {
			t.Errorf("the error: %v", err)
		}
		os.Remove(name)
	}
}
