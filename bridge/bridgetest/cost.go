package bridgetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat/chattest"
)

// MessageCost measures, from outside, what one message costs the program
// serving ch: the processor time (user and system) the process spends
// on b.N messages, written in turn across KillChats chats through the
// channel's platform fake and answered at once by a model server, after
// a first message in each chat (connections, caches, the first session)
// is answered. It reports "cpu-ms/msg", the same way for every channel,
// so channels compare beside each other. Run it with a fixed count
// (-benchtime=300x): each run starts the program.
func MessageCost(b *testing.B, ch Killed, launch Launch) {
	dir := b.TempDir()
	model := chattest.NewModelServer(b)
	model.Forget = true
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		text := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				text = m.Content
			}
		}
		return chattest.Step{Text: "Answer to " + asked().FindString(text)}
	}
	addr := FreeAddr(b)
	path := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-cost\nstore:\n  path: %s\nhttp:\n  listen: %s\n  metrics: false\nlog:\n  level: warn\n%s",
		model.URL, filepath.Join(dir, "loadout.db"), addr, ch.Config)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := launch(b, path)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if ch.Ready != nil {
		Await(b, "the process to reach the platform", ch.Ready)
	}
	answered := func() int {
		n := 0
		for _, a := range ch.Answers() {
			n += len(a)
		}
		return n
	}
	sent := 0
	send := func(i int) {
		c := i % KillChats
		ch.Send(b, addr, c, killText(c, i/KillChats))
		sent++
	}
	for i := range KillChats {
		send(i)
	}
	Await(b, "the first messages to be answered", func() bool { return answered() >= sent })
	b.ResetTimer()
	before := processCPU(b, cmd.Process.Pid)
	for i := range b.N {
		send(KillChats + i)
	}
	Await(b, fmt.Sprintf("%d messages to be answered", sent), func() bool { return answered() >= sent })
	used := processCPU(b, cmd.Process.Pid) - before
	b.StopTimer()
	b.ReportMetric(float64(used.Microseconds())/float64(b.N)/1000, "cpu-ms/msg")
	if b.Failed() {
		b.Logf("the process logged:\n%s", Tail(logs.String(), 4000))
	}
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// processCPU is the processor time, user and system, that process pid
// has used so far, read from /proc.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: state is the first, utime the 12th, stime the 13th.
	_, rest, _ := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}
