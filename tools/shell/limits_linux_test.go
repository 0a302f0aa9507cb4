//go:build linux

package shell

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// recorder is the kernel as a test sees limitAndExec use it.
type recorder struct {
	calls []string
	fail  syscall.Errno
}

func (r *recorder) prlimit(res int, _ uint64) syscall.Errno {
	if r.calls != nil {
		r.calls = append(r.calls, "limit "+resName[res])
	}
	return 0
}

func (r *recorder) execve(*byte, []*byte, []*byte) syscall.Errno {
	if r.calls != nil {
		r.calls = append(r.calls, "exec")
	}
	return r.fail
}

func (r *recorder) write(int, []byte) {}

var resName = map[int]string{unix.RLIMIT_CPU: "cpu", unix.RLIMIT_NPROC: "nproc", unix.RLIMIT_FSIZE: "fsize", unix.RLIMIT_CORE: "core", unix.RLIMIT_AS: "as"}

// Between the address-space limit and exec nothing allocates: a Go
// runtime whose heap must grow past the limit dies ("fatal error:
// runtime: cannot allocate memory") instead of running the command, as
// a command run under exec.limits once did on a busy machine. The
// address space is limited last, just before exec.
func TestNothingAllocatesBetweenTheLimitsAndExec(t *testing.T) {
	limits := []rlimit{{unix.RLIMIT_CPU, 1}, {unix.RLIMIT_NPROC, 40}, {unix.RLIMIT_FSIZE, 1 << 20}, {unix.RLIMIT_CORE, 0}, {unix.RLIMIT_AS, 1 << 30}}
	prog, _ := syscall.BytePtrFromString("/bin/true")
	argv, _ := syscall.SlicePtrFromStrings([]string{"true"})
	envv, _ := syscall.SlicePtrFromStrings(nil)
	k := &recorder{fail: syscall.ENOENT}
	if n := testing.AllocsPerRun(100, func() {
		if errno := limitAndExec(k, limits, prog, argv, envv); errno != syscall.ENOENT {
			t.Fatalf("errno = %v", errno)
		}
	}); n != 0 {
		t.Errorf("limitAndExec allocates %v times", n)
	}
	k.calls = []string{}
	limitAndExec(k, limits, prog, argv, envv)
	if got := strings.Join(k.calls, ", "); got != "limit cpu, limit nproc, limit fsize, limit core, limit as, exec" {
		t.Errorf("calls: %s", got)
	}
}

// A command that cannot start under the limits is reported plainly,
// even with an address space far below what the child already uses.
func TestAFailedStartUnderTheLimitsIsReported(t *testing.T) {
	confinable(t)
	dir := t.TempDir()
	s := newSpec(Config{Enabled: true, Limits: Limits{MemoryMB: 1, Processes: 40, FileSizeMB: 1, CPU: 1e9}}, "/nonexistent/program", nil, nil, dir)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = []string{childEnv + "=" + s.encode()}
	cmd.ExtraFiles = []*os.File{w}
	out, _ := cmd.CombinedOutput()
	w.Close()
	buf := make([]byte, 4096)
	n, _ := r.Read(buf)
	if report := string(buf[:n]); report != "start /nonexistent/program: no such file or directory" || cmd.ProcessState.ExitCode() != 125 {
		t.Errorf("report %q, exit %d, output %s", report, cmd.ProcessState.ExitCode(), out)
	}
}
