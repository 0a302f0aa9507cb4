// Package proc starts the programs loadout runs for a while — MCP stdio
// servers, exec commands — so that they, and whatever they start, end
// with loadout however it ends, and with their call when it times out.
//
// A program is not started directly: the loadout binary is started again
// as its keeper (Serve), in a process group of its own, set to receive
// SIGTERM when loadout dies (even by SIGKILL). The keeper starts the
// program in a process group of its own and takes in every process the
// program orphans (a child subreaper). When the program exits, or the
// keeper is told to stop, or loadout is gone, the keeper kills the
// program's group and every process it took in, then exits as the
// program did.
package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Self is how loadout starts itself again (a keeper, a worker, exec's
// confined child): its own binary, with an argument that makes a test
// binary run no tests, so that its TestMain hands the process over as
// main does.
var Self = []string{"/proc/self/exe", "-test.run=^$"}

// keepEnv carries the program to keep; its presence makes the process a
// keeper.
const keepEnv = "LOADOUT_KEEP"

// spec is what a keeper runs.
type spec struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Files is how many descriptors after standard error the program
	// gets, as the keeper got them.
	Files int `json:"files"`
	// Parent is loadout's pid: a keeper whose parent is another has
	// outlived it.
	Parent int `json:"parent"`
}

// Command is exec.Command for a program kept by a keeper: the Cmd it
// returns runs the keeper, which runs name with args, and passes on the
// Env, Dir, standard streams and ExtraFiles set on the Cmd before Start
// (Prepare does that). Cancelling ctx, or Cmd.Cancel, asks the keeper to
// end the program and its descendants.
func Command(ctx context.Context, name string, args ...string) *Cmd {
	if lp, err := exec.LookPath(name); err == nil {
		name = lp // found as exec.Command finds it, on loadout's PATH
	}
	c := &Cmd{name: name, args: args}
	c.Cmd = exec.CommandContext(ctx, Self[0], Self[1:]...)
	c.Cmd.Args[0] = "loadout-keeper"
	c.Cmd.SysProcAttr = sysProcAttr()
	c.Cmd.Cancel = func() error { return c.Cmd.Process.Signal(syscall.SIGTERM) }
	c.Cmd.WaitDelay = 5 * time.Second
	return c
}

// Cmd is a program run by a keeper.
type Cmd struct {
	*exec.Cmd
	name string
	args []string
}

// Prepare moves the program's environment and directory, set on the Cmd,
// into the keeper's instructions. Start calls it; a caller whose library
// starts the Cmd itself (an MCP transport) calls it before handing it
// over.
func (c *Cmd) Prepare() *exec.Cmd {
	if c.name == "" {
		return c.Cmd // prepared already
	}
	s := spec{Path: c.name, Args: c.args, Env: c.Cmd.Env, Dir: c.Cmd.Dir, Files: len(c.Cmd.ExtraFiles), Parent: os.Getpid()}
	if s.Env == nil {
		s.Env = []string{}
	}
	b, _ := json.Marshal(s)
	c.Cmd.Env = []string{keepEnv + "=" + string(b)}
	c.name = ""
	return c.Cmd
}

// Start prepares and starts the keeper.
func (c *Cmd) Start() error { c.Prepare(); return c.Cmd.Start() }

// Run starts the keeper and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Serve makes this process a keeper when it was started as one, and then
// never returns. main (and a test binary's TestMain) calls it first.
func Serve() {
	raw, ok := os.LookupEnv(keepEnv)
	if !ok {
		return
	}
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "keeper: the instructions do not parse:", err)
		os.Exit(125)
	}
	os.Exit(keep(s))
}

// keep runs s and returns the exit code to leave with.
func keep(s spec) int {
	if os.Getppid() != s.Parent {
		return 125 // loadout ended before its keeper was up
	}
	if err := becomeReaper(); err != nil {
		fmt.Fprintln(os.Stderr, "keeper:", err)
		return 125
	}
	stop := make(chan os.Signal, 4)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for i := range s.Files {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(3+i), "fd"+strconv.Itoa(3+i)))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "keeper:", err)
		return 127
	}
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = 127
		}
		done <- code
	}()
	// loadout gone without the signal reaching here: checked too.
	orphaned := time.NewTicker(time.Second)
	defer orphaned.Stop()
	code := 0
wait:
	for {
		select {
		case code = <-done:
			break wait
		case <-stop:
			code = 128 + int(syscall.SIGTERM)
			break wait
		case <-orphaned.C:
			if os.Getppid() != s.Parent {
				code = 128 + int(syscall.SIGTERM)
				break wait
			}
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	killTaken()
	return code
}
