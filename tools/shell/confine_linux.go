//go:build linux

package shell

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// minABI is the Landlock ABI commands need: 4 (Linux 6.7) confines
// files and TCP. From 6 (Linux 6.12) signals and abstract sockets are
// kept from reaching loadout too.
const minABI = 4

// kernelABI is the kernel's Landlock ABI version; a test sets another.
var kernelABI = landlockABI

// landlockABI is the kernel's Landlock ABI version; 0 without Landlock.
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Check reports why exec cannot run confined commands here, naming the
// key that runs them unconfined instead; nil when it can, when exec is
// off or when exec.unconfined is set.
func Check(cfg Config) error {
	if !cfg.Enabled || cfg.Unconfined {
		return nil
	}
	if v := kernelABI(); v < minABI {
		return fmt.Errorf("exec: this kernel's Landlock (ABI %d) cannot confine commands; ABI %d (Linux 6.7) or newer is needed. Set exec.unconfined: true to run them without confinement, or turn exec off", v, minABI)
	}
	return nil
}

// confineAndExec confines this process as s says and becomes the
// command. It returns only on failure.
func confineAndExec(s spec, report *os.File) error {
	runtime.LockOSThread()
	syscall.CloseOnExec(int(report.Fd())) // the command does not inherit it
	if v := landlockABI(); v < minABI {
		return fmt.Errorf("this kernel's Landlock (ABI %d) cannot confine commands", v)
	}
	dirs, files := readable(s.Read, s.Hide)
	var devs []string
	for _, d := range s.Devices {
		if _, err := os.Stat(d); err == nil {
			devs = append(devs, d)
		}
	}
	rules := []landlock.Rule{
		// Links and renames within the workspace; not from elsewhere.
		landlock.RWDirs(s.Workspace).WithRefer(),
		landlock.RODirs(dirs...),
		landlock.ROFiles(files...),
		landlock.RWFiles(devs...),
	}
	cfg := landlock.V6.BestEffort()
	var err error
	if s.Network {
		if err = cfg.RestrictPaths(rules...); err == nil {
			err = cfg.RestrictScoped()
		}
	} else {
		err = cfg.Restrict(rules...) // no TCP rule: no bind, no connect
	}
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if s.User != 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(s.User); err != nil {
			return fmt.Errorf("setgid: %w", err)
		}
		if err := syscall.Setuid(s.User); err != nil {
			return fmt.Errorf("setuid: %w", err)
		}
	}
	l := s.Limits
	for _, r := range []struct {
		res int
		max uint64
	}{
		{unix.RLIMIT_CPU, uint64(max(1, int(l.CPU.Seconds()+0.999)))},
		{unix.RLIMIT_AS, uint64(l.MemoryMB) << 20},
		{unix.RLIMIT_NPROC, uint64(l.Processes)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) << 20},
		{unix.RLIMIT_CORE, 0},
	} {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.max, Max: r.max}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.res, err)
		}
	}
	return fmt.Errorf("start %s: %w", s.Prog, syscall.Exec(s.Prog, append([]string{filepath.Base(s.Prog)}, s.Args...), s.Env))
}

// handOver gives a chat's workspace to the user commands run as, when
// that is not loadout's own: its directory and files, each file with no
// other link (a link out of the workspace is not made the command's).
func handOver(dir string, user int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && !d.IsDir() && st.Nlink > 1 {
				return nil
			}
		}
		return os.Lchown(p, user, user)
	})
}
