package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat"
	"loadout/chat/chattest"
)

// Flags of BenchmarkSoak.
var (
	soakChats    = flag.Int("soak.chats", 1000, "BenchmarkSoak: chats")
	soakMessages = flag.Int("soak.messages", 20, "BenchmarkSoak: messages per chat")
	soakKills    = flag.Int("soak.kills", 10, "BenchmarkSoak: SIGKILLs of the process during the run")
	soakFaults   = flag.Float64("soak.faults", 0.2, "BenchmarkSoak: share of model calls that fail, one of six ways")
	soakSeed     = flag.Uint64("soak.seed", 1, "BenchmarkSoak: seed of the faults and the kills")
	soakEvery    = flag.Duration("soak.every", 20*time.Second, "BenchmarkSoak: mean time between kills")
)

// BenchmarkSoak drives the whole process through the Telegram fake with
// -soak.chats chats × -soak.messages messages (all queued at the start),
// while the fake model fails -soak.faults of its calls at random — 429
// with Retry-After, 500, a call past llm.timeout, an answer cut in the
// middle, a tool call with invalid JSON arguments, a call of a tool that
// does not exist — and the process is killed with SIGKILL -soak.kills
// times at random moments (about -soak.every apart) and started again
// at once. It then checks
// every message: answered exactly once (the answer, or a plain failure
// sentence, as a reply to it), none twice, in each chat's order, and
// reports those counts, the messages per second and the slope of the
// resident memory over each life of the process.
//
//	go test -tags sqlite_fts5 -run '^$' -bench Soak -benchtime 1x -timeout 60m ./cmd/loadout/
func BenchmarkSoak(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "loadout")
	if out, err := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	for i := 0; i < b.N; i++ {
		r := soak(b, bin, filepath.Join(dir, strconv.Itoa(i)))
		b.ReportMetric(float64(r.lost), "lost")
		b.ReportMetric(float64(r.doubled), "doubled")
		b.ReportMetric(float64(r.disordered), "out-of-order")
		b.ReportMetric(float64(r.wrong), "wrong-reply")
		b.ReportMetric(float64(r.failed), "failure-sentences")
		b.ReportMetric(float64(r.kills), "kills")
		b.ReportMetric(float64(r.faults), "model-faults")
		b.ReportMetric(r.perSecond, "msgs/s")
		b.ReportMetric(r.slope, "RSS-MB/1k-msgs")
		b.ReportMetric(r.peakRSS/1e6, "peak-RSS-MB")
	}
}

type soakFigures struct {
	lost, doubled, disordered, wrong, failed, kills, faults int
	perSecond, slope, peakRSS                               float64
}

func soak(b *testing.B, bin, dir string) soakFigures {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	tg := telegramtest.New(b)
	model := chattest.NewModelServer(b)
	model.Forget = true
	var faults atomic.Int64
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(*soakSeed, 7))
	roll := func() (float64, int) {
		rmu.Lock()
		defer rmu.Unlock()
		return rng.Float64(), rng.IntN(6)
	}
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		asked := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				asked = m.Content
			}
		}
		if p, kind := roll(); p < *soakFaults {
			faults.Add(1)
			switch kind {
			case 0:
				return chattest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}},
					Body: `{"error":{"message":"Rate limit reached","type":"rate_limit"}}`}
			case 1:
				return chattest.Step{Status: http.StatusInternalServerError, Body: `{"error":{"message":"The server had an error"}}`}
			case 2:
				return chattest.Step{Text: "too late", Delay: 3 * time.Second} // llm.timeout is 1s
			case 3:
				return chattest.Step{Text: "Answer to " + asked + " (cut)", Cut: true}
			case 4:
				return chattest.Step{Calls: []chat.ToolCall{{Name: "get_current_time", Arguments: `{"time_zone": "Europe/Lis`}}}
			default:
				return chattest.Step{Calls: []chat.ToolCall{{Name: "no_such_tool", Arguments: `{}`}}}
			}
		}
		return chattest.Step{Text: "Answer to " + asked}
	}
	chats, per := *soakChats, *soakMessages
	users := make([]string, chats)
	for i := range users {
		users[i] = strconv.Itoa(1000 + i)
	}
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-bench\n  timeout: 1s\n  attempts: 4\n  backoff: 50ms\n  max_backoff: 1s\n"+
		"store:\n  path: %s\nhttp:\n  listen: 127.0.0.1:0\n  metrics: false\nlog:\n  level: error\n"+
		"telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
		"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
		model.URL, filepath.Join(dir, "loadout.db"), telegramtest.Token, tg.Endpoint(), strings.Join(users, ", "))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	// Every message is queued first, so the messages' ids are 1..n in
	// the order pushed (the bot's own take ids after them). Each chat is
	// a group, where every answer is a reply to its message.
	total := chats * per
	for m := range per {
		for c := range chats {
			tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, ChatID: int64(-1000 - c), ChatType: "group",
				Text: fmt.Sprintf("@%s c%d m%d", telegramtest.BotUserName, c, m)})
		}
	}
	answered := func() int {
		seen := map[int]bool{}
		for _, s := range tg.Sent() {
			if s.ReplyTo >= 1 && s.ReplyTo <= total && s.Text != bridge.TextRetrying {
				seen[s.ReplyTo] = true
			}
		}
		return len(seen)
	}

	var (
		mu      sync.Mutex
		cmd     *exec.Cmd
		samples [][][2]float64 // per life: (answered, RSS)
		peak    float64
	)
	start := func() {
		c := exec.Command(bin, "serve", "-config", path)
		c.Dir = dir
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		go c.Wait()
		mu.Lock()
		cmd = c
		samples = append(samples, nil)
		mu.Unlock()
	}
	b.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		cmd.Process.Kill()
	})
	began := time.Now()
	start()
	stop := make(chan struct{})
	go func() {
		// RSS and progress, twice a second.
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			mu.Lock()
			pid, life := cmd.Process.Pid, len(samples)-1
			mu.Unlock()
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(raw), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
					n := answered()
					mu.Lock()
					if life == len(samples)-1 {
						samples[life] = append(samples[life], [2]float64{float64(n), kb * 1024})
					}
					peak = max(peak, kb*1024)
					mu.Unlock()
				}
			}
		}
	}()
	// The kills, at random moments: each life lasts a random time
	// around -soak.every, drawn from the seed, unrelated to what the
	// process is doing.
	kills := 0
	var killedAt []time.Time
	next := time.Now().Add(time.Duration((0.5 + rng.Float64()) * float64(*soakEvery)))
	deadline := time.Now().Add(50 * time.Minute)
	for answered() < total {
		if time.Now().After(deadline) {
			close(stop)
			b.Fatalf("after 50 minutes %d of %d messages are answered", answered(), total)
		}
		if kills < *soakKills && time.Now().After(next) {
			mu.Lock()
			cmd.Process.Signal(syscall.SIGKILL)
			mu.Unlock()
			killedAt = append(killedAt, time.Now())
			kills++
			time.Sleep(50 * time.Millisecond)
			start()
			next = time.Now().Add(time.Duration((0.5 + rng.Float64()) * float64(*soakEvery)))
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(began)
	time.Sleep(3 * time.Second) // anything doubled arrives now
	close(stop)

	var f soakFigures
	f.kills, f.faults, f.peakRSS = kills, int(faults.Load()), peak
	f.perSecond = float64(total) / took.Seconds()
	replies := make(map[int][]string, total)
	times := make(map[int][]time.Time, total)
	last := map[int]int{} // chat → last message answered
	for _, s := range tg.Sent() {
		if s.ReplyTo < 1 || s.ReplyTo > total || s.Text == bridge.TextRetrying {
			continue
		}
		replies[s.ReplyTo] = append(replies[s.ReplyTo], s.Text)
		times[s.ReplyTo] = append(times[s.ReplyTo], s.At)
		m, c := (s.ReplyTo-1)/chats, (s.ReplyTo-1)%chats
		if prev, ok := last[c]; ok && m < prev {
			f.disordered++
		}
		last[c] = m
		switch {
		case s.Text == fmt.Sprintf("Answer to c%d m%d", c, m):
		case !strings.HasPrefix(s.Text, "Answer to "):
			// A plain sentence saying it failed (the model unreachable
			// after its retries, a tool failing again and again, a
			// quarantine): an answer too.
			f.failed++
		default:
			f.wrong++ // another message's answer
			if f.wrong <= 5 {
				b.Logf("message %d (c%d m%d) got %q", s.ReplyTo, c, m, s.Text)
			}
		}
	}
	for id := 1; id <= total; id++ {
		switch n := len(replies[id]); {
		case n == 0:
			f.lost++
		case n > 1:
			f.doubled++
			if f.doubled <= 5 {
				b.Logf("message %d got %q at %v (kills at %v)", id, replies[id], times[id], killedAt)
			}
		}
	}
	// The slope of RSS over messages answered, in each life long enough
	// to tell, weighted by its length.
	var sum, weight float64
	for _, life := range samples {
		if len(life) < 10 {
			continue
		}
		life = life[len(life)/5:] // past the start-up's growth
		var n, sx, sy, sxx, sxy float64
		for _, p := range life {
			n++
			sx += p[0]
			sy += p[1]
			sxx += p[0] * p[0]
			sxy += p[0] * p[1]
		}
		den := n*sxx - sx*sx
		if den == 0 {
			continue
		}
		slope := (n*sxy - sx*sy) / den // bytes per message
		span := life[len(life)-1][0] - life[0][0]
		sum += slope * span
		weight += span
	}
	if weight > 0 {
		f.slope = sum / weight * 1000 / 1e6
	}
	b.Logf("%d messages in %s: %d lost, %d doubled, %d out of order, %d wrong, %d failure sentences; %d kills, %d model faults; RSS slope %.3f MB per 1,000 messages, peak %.0f MB",
		total, took.Round(time.Second), f.lost, f.doubled, f.disordered, f.wrong, f.failed, kills, f.faults, f.slope, peak/1e6)
	return f
}
