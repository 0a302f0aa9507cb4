// Package worker runs a parser of input loadout did not write (a PDF a
// stranger sent) in a child process: the loadout binary started again as
// a worker, under a memory limit, a processor-time limit and a wall-clock
// limit. A file that crashes the parser, or asks it for all the memory
// there is, ends the worker with a clear error; the service goes on.
//
// The protocol is the request's bytes on the worker's standard input and
// one answer on its standard output: 'O' and the result, or 'E' and an
// error message the job chose to return.
package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"loadout/proc"
)

// Func is a job: it reads a request and answers it, in the worker.
type Func func(req []byte) ([]byte, error)

// jobEnv names the job a worker process runs.
const jobEnv = "LOADOUT_WORKER"

// shared are the places of callers that name none.
var shared = proc.NewSlots(0)

// maxAnswer bounds what a worker may answer.
const maxAnswer = 64 << 20

// Limits bound one run of a job.
type Limits struct {
	// MemoryMB is the memory the worker may take beyond its own start
	// (RLIMIT_AS); default 512.
	MemoryMB int
	// CPU is the processor time it may use (RLIMIT_CPU); default 20s.
	CPU time.Duration
	// Wall is how long it may take once started; default 30s.
	Wall time.Duration
	// Slots are the places it waits for before it starts, shared with
	// every other worker of the process; nil is the package's own
	// (the number of CPUs), so no caller runs unbounded.
	Slots *proc.Slots
}

func (l *Limits) setDefaults() {
	if l.MemoryMB <= 0 {
		l.MemoryMB = 512
	}
	if l.CPU <= 0 {
		l.CPU = 20 * time.Second
	}
	if l.Wall <= 0 {
		l.Wall = 30 * time.Second
	}
	if l.Slots == nil {
		l.Slots = shared
	}
}

// The ways a worker fails that are the input's fault.
var (
	// ErrMemory: the input asked for more memory than allowed.
	ErrMemory = errors.New("it asks for more memory than allowed")
	// ErrTime: reading it took more time than allowed.
	ErrTime = errors.New("reading it takes longer than allowed")
	// ErrCrash: the parser failed on it.
	ErrCrash = errors.New("the reader failed on it")
)

// JobError is an error a job returned itself, as its message.
type JobError struct{ Message string }

func (e *JobError) Error() string { return e.Message }

// Serve makes this process a worker when it was started as one, and
// then never returns: it runs the named job of jobs on its standard input
// and exits. main, and the TestMain of a test binary whose code runs
// jobs, call it first.
func Serve(jobs map[string]Func) {
	name, ok := os.LookupEnv(jobEnv)
	if !ok {
		return
	}
	job := jobs[name]
	if job == nil {
		fmt.Fprintf(os.Stderr, "worker: no job %q\n", name)
		os.Exit(3)
	}
	if err := setLimits(); err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(3)
	}
	req, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(3)
	}
	out, err := job(req)
	w := os.Stdout
	if err != nil {
		w.Write(append([]byte{'E'}, err.Error()...))
		os.Exit(0)
	}
	w.Write(append([]byte{'O'}, out...))
	os.Exit(0)
}

// Run runs job in a worker with req on its standard input and returns its
// result; a job's own error is a *JobError, a worker ended by the input
// ErrMemory, ErrTime or ErrCrash. It first waits for one of l.Slots'
// places for as long as ctx allows; a ctx that ends first is returned
// wrapped (context.DeadlineExceeded: the call's timeout), and no worker
// is started.
func Run(ctx context.Context, job string, req []byte, l Limits) ([]byte, error) {
	l.setDefaults()
	if err := l.Slots.Take(ctx); err != nil {
		return nil, fmt.Errorf("worker %s: waiting for a place: %w", job, err)
	}
	defer l.Slots.Give()
	ctx, cancel := context.WithTimeout(ctx, l.Wall)
	defer cancel()
	// The worker is told to die with the thread that starts it: keep
	// that thread for as long as the worker runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.CommandContext(ctx, proc.Self[0], proc.Self[1:]...)
	cmd.Env = []string{
		jobEnv + "=" + job,
		memEnv + "=" + fmt.Sprint(l.MemoryMB),
		cpuEnv + "=" + fmt.Sprint(max(1, int(l.CPU.Seconds()+0.999))),
		parentEnv + "=" + fmt.Sprint(os.Getpid()),
		"GOMAXPROCS=1",
	}
	cmd.Stdin = bytes.NewReader(req)
	var out, errOut capped
	out.max, errOut.max = maxAnswer, 16<<10
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	b := out.buf.Bytes()
	switch {
	case err == nil && len(b) > 0 && b[0] == 'O':
		return b[1:], nil
	case err == nil && len(b) > 0 && b[0] == 'E':
		return nil, &JobError{Message: string(b[1:])}
	case ctx.Err() == context.DeadlineExceeded:
		return nil, ErrTime
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	stderr := errOut.buf.String()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL) {
			return nil, ErrTime
		}
	}
	// The Go runtime's words when the memory limit refuses it (the last
	// two in a -race build).
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "address space collisions") || strings.Contains(stderr, "failed to allocate") {
		return nil, ErrMemory
	}
	if strings.Contains(stderr, "worker: ") {
		return nil, fmt.Errorf("worker %s: %s", job, strings.TrimSpace(stderr))
	}
	return nil, ErrCrash
}

// capped keeps the first max bytes written.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
