package worker

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/proc"
	"loadout/proc/proctest"
)

// jobs are the test binary's jobs, run by its workers.
var jobs = map[string]Func{
	"echo": func(req []byte) ([]byte, error) { return append([]byte("got "), req...), nil },
	"refuse": func(req []byte) ([]byte, error) {
		return nil, errors.New("not a PDF")
	},
	// What a hostile file does to a parser: ask for a terabyte, spin,
	// crash from a goroutine (no recover can catch that).
	"hog": func([]byte) ([]byte, error) {
		b := make([]byte, 1<<40)
		b[len(b)-1] = 1
		return b[:1], nil
	},
	"grow": func([]byte) ([]byte, error) {
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 16<<20))
			for _, b := range keep {
				b[0]++
			}
		}
	},
	"spin": func([]byte) ([]byte, error) {
		for {
		}
	},
	"crash": func([]byte) ([]byte, error) {
		done := make(chan struct{})
		go func() { var m map[string]int; m["x"] = 1; close(done) }()
		<-done
		return nil, nil
	},
	"sleep": func([]byte) ([]byte, error) { time.Sleep(time.Hour); return nil, nil },
	"nap":   func([]byte) ([]byte, error) { time.Sleep(300 * time.Millisecond); return []byte("rested"), nil },
}

func TestMain(m *testing.M) {
	Serve(jobs)
	os.Exit(m.Run())
}

func TestJobsRunInAWorker(t *testing.T) {
	ctx := context.Background()
	out, err := Run(ctx, "echo", []byte("a PDF"), Limits{})
	if err != nil || string(out) != "got a PDF" {
		t.Fatalf("echo: %q %v", out, err)
	}
	_, err = Run(ctx, "refuse", nil, Limits{})
	var je *JobError
	if !errors.As(err, &je) || je.Message != "not a PDF" {
		t.Fatalf("refuse: %v", err)
	}
}

// Each way a hostile input ends a parser ends the worker with its
// reason, and the caller goes on.
func TestWhatEndsAWorkerIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		job  string
		l    Limits
		want error
	}{
		{"hog", Limits{MemoryMB: 64}, ErrMemory},
		{"grow", Limits{MemoryMB: 128}, ErrMemory},
		{"spin", Limits{CPU: time.Second, Wall: 20 * time.Second}, ErrTime},
		{"sleep", Limits{Wall: 300 * time.Millisecond}, ErrTime},
		{"crash", Limits{}, ErrCrash},
	} {
		start := time.Now()
		_, err := Run(ctx, c.job, nil, c.l)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.job, err, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %s", c.job, d)
		}
	}
	if _, err := Run(ctx, "nope", nil, Limits{}); err == nil || !strings.Contains(err.Error(), `no job "nope"`) {
		t.Errorf("an unknown job: %v", err)
	}
}

// Found with eight pdf_text calls on a 1.4 MB flate bomb: each worker
// was held to its own memory limit, but all eight ran at once and took
// near 1.9 GB together. However many calls come at once, no more
// workers than the process's places are alive together; the rest wait.
func TestWorkersAliveAtOnceStayWithinTheSlots(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("workers are counted in /proc")
	}
	const limit, calls = 2, 8
	slots := proc.NewSlots(limit)
	most := proctest.Most(func() int { return len(proctest.Children(jobEnv)) })
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := Run(context.Background(), "nap", nil, Limits{Slots: slots}); err != nil || string(out) != "rested" {
				t.Errorf("nap: %q %v", out, err)
			}
		}()
	}
	wg.Wait()
	if n := most(); n > limit || n == 0 {
		t.Errorf("%d workers were alive at once; the limit is %d", n, limit)
	}
	if p := slots.Peak(); p > limit || p == 0 {
		t.Errorf("the slots counted %d workers at once; the limit is %d", p, limit)
	}
}

// A call that gets no place before its context ends starts no worker
// and returns the context's error: the executor makes it a timeout.
func TestACallWaitingPastItsTimeoutStartsNoWorker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("workers are counted in /proc")
	}
	slots := proc.NewSlots(1)
	held := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), "sleep", nil, Limits{Wall: 3 * time.Second, Slots: slots})
		held <- err
	}()
	for len(proctest.Children(jobEnv)) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, "echo", nil, Limits{Slots: slots}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call past its timeout: %v", err)
	}
	if n := len(proctest.Children(jobEnv)); n > 1 {
		t.Errorf("%d workers alive with one place", n)
	}
	if err := <-held; !errors.Is(err, ErrTime) {
		t.Errorf("the worker holding the place: %v", err)
	}
}

// BenchmarkRun is the cost of a worker: starting the binary again, the
// request and the answer.
func BenchmarkRun(b *testing.B) {
	req := make([]byte, 100<<10)
	for b.Loop() {
		if _, err := Run(context.Background(), "echo", req, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
