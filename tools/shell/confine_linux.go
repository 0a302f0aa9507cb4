//go:build linux

package shell

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"unsafe"

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
// command. It returns only on a failure before the limits are set; after
// them it reports on report itself and exits.
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
	argv, err := syscall.SlicePtrFromStrings(append([]string{filepath.Base(s.Prog)}, s.Args...))
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(s.Env)
	if err != nil {
		return err
	}
	prog, err := syscall.BytePtrFromString(s.Prog)
	if err != nil {
		return err
	}
	why := []byte("start " + s.Prog + ": ")
	l := s.Limits
	limits := [...]rlimit{
		{unix.RLIMIT_CPU, uint64(max(1, int(l.CPU.Seconds()+0.999)))},
		{unix.RLIMIT_NPROC, uint64(l.Processes)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) << 20},
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_AS, uint64(l.MemoryMB) << 20}, // last: see limitAndExec
	}
	debug.SetGCPercent(-1) // no collection starts between the limits and exec
	errno := limitAndExec(rawSys{}, limits[:], prog, argv, envv)
	// Nothing may be allocated now: write the report and leave.
	rawSys{}.write(int(report.Fd()), why)
	rawSys{}.write(int(report.Fd()), unsafe.Slice(unsafe.StringData(errno.Error()), len(errno.Error())))
	unix.Exit(125)
	panic("not reached")
}

// rlimit is one resource limit, soft and hard alike.
type rlimit struct {
	res int
	max uint64
}

// sys is the kernel as limitAndExec uses it; a test records the calls.
type sys interface {
	prlimit(res int, max uint64) syscall.Errno
	execve(prog *byte, argv, envv []*byte) syscall.Errno
	write(fd int, b []byte)
}

// limitAndExec sets the limits, the address space's last, and becomes
// prog, returning why not. Nothing in it allocates, and it makes only
// raw system calls: once the address space is bounded below what the Go
// runtime has reserved, an allocation that needs memory from the system,
// or a new thread the scheduler starts (past the process limit), ends
// the process with the runtime's "cannot allocate memory" instead of
// running the command or reporting why it did not run.
func limitAndExec(k sys, limits []rlimit, prog *byte, argv, envv []*byte) syscall.Errno {
	for _, r := range limits {
		if errno := k.prlimit(r.res, r.max); errno != 0 {
			return errno
		}
	}
	return k.execve(prog, argv, envv)
}

// rawSys makes the calls as they are, without the scheduler.
type rawSys struct{}

func (rawSys) prlimit(res int, max uint64) syscall.Errno {
	lim := unix.Rlimit{Cur: max, Max: max}
	_, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(res), uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	return errno
}

func (rawSys) execve(prog *byte, argv, envv []*byte) syscall.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(prog)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return errno
}

func (rawSys) write(fd int, b []byte) {
	if len(b) > 0 {
		unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
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
