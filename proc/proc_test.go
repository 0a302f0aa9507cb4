package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"loadout/proc/proctest"
)

func TestMain(m *testing.M) {
	Serve()
	if marker := os.Getenv("LOADOUT_TEST_PROC_PARENT"); marker != "" {
		// A loadout that keeps a program, then waits to be killed.
		cmd := Command(context.Background(), "sh", "-c", tree(marker))
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			os.Exit(1)
		}
		cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tree is a shell script that leaves behind what a program may: a child
// in its group, a grandchild, and one in a session of its own; each
// sleep names marker so the test can find it.
func tree(marker string) string {
	return fmt.Sprintf(`sleep %[1]s & (sleep %[1]s & sleep %[1]s) & setsid sleep %[1]s & echo started; sleep %[1]s`, marker)
}

// started waits for the tree's "started".
func started(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("the program said %q, %v", line, err)
	}
}

// Every way a kept program can end leaves nothing of it running: its
// call cancelled (a timeout), loadout killed with SIGKILL, the program
// exiting with children still running.
func TestNothingOutlivesAKeptProgram(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	t.Run("cancelled", func(t *testing.T) {
		marker := "1001.5"
		ctx, cancel := context.WithCancel(context.Background())
		cmd := Command(ctx, "sh", "-c", tree(marker))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started(t, bufio.NewReader(out))
		// The tree is up (its shells and sleeps carry the marker), so
		// "none left" below is about processes that ran. The background
		// ones may still be forking when "started" is printed: wait for
		// them.
		deadline := time.Now().Add(5 * time.Second)
		for proctest.Running(marker) < 4 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := proctest.Running(marker); n < 4 {
			t.Fatalf("only %d of the program's processes run", n)
		}
		cancel()
		cmd.Wait()
		if n := proctest.Left(marker, 10*time.Second); n != 0 {
			t.Fatalf("%d processes outlived the cancelled call", n)
		}
	})
	t.Run("loadout killed", func(t *testing.T) {
		marker := "1002.5"
		parent := exec.Command(os.Args[0], "-test.run=^$")
		parent.Env = append(os.Environ(), "LOADOUT_TEST_PROC_PARENT="+marker)
		out, _ := parent.StdoutPipe()
		if err := parent.Start(); err != nil {
			t.Fatal(err)
		}
		started(t, bufio.NewReader(out))
		parent.Process.Signal(syscall.SIGKILL)
		parent.Wait()
		if n := proctest.Left(marker, 10*time.Second); n != 0 {
			t.Fatalf("%d processes outlived loadout's SIGKILL", n)
		}
	})
	t.Run("program exits", func(t *testing.T) {
		marker := "1003.5"
		cmd := Command(context.Background(), "sh", "-c", strings.Replace(tree(marker), "; sleep "+marker, "", 1))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started(t, bufio.NewReader(out))
		cmd.Wait()
		if n := proctest.Left(marker, 10*time.Second); n != 0 {
			t.Fatalf("%d processes outlived the program", n)
		}
	})
}

// The program's exit code and streams pass through the keeper.
func TestKeptProgramRunsAsItself(t *testing.T) {
	cmd := Command(context.Background(), "sh", "-c", `echo "in $PWD as $FOO"; echo err >&2; exit 7`)
	dir := t.TempDir()
	cmd.Dir, cmd.Env = dir, []string{"FOO=bar"}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 7 || stdout.String() != "in "+dir+" as bar\n" || stderr.String() != "err\n" {
		t.Fatalf("err %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}
