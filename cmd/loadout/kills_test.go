package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge/discord/discordtest"
	"loadout/bridge/slack/slacktest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/chat/chattest"
)

// Kill-test sizes: several chats in flight at every kill.
const (
	killChats    = 6
	killMessages = 5
	killKills    = 10
)

// killedChannel is one channel under TestKillsFromOutsideQuarantineNothing:
// its config section, how its messages reach the process, and what each
// chat was answered.
type killedChannel struct {
	config string
	// send hands message m of chat c to the process at addr (its HTTP
	// listener), trying again, as the platform does, until it is taken.
	send func(t *testing.T, addr string, c, m int)
	// answers are the texts each chat was answered, in order.
	answers func() [][]string
	// ready, when set, reports whether the first process has reached the
	// platform: people write only then.
	ready func() bool
}

// Found by measuring: a process killed from outside (a deploy, a node
// going away) was counted against whatever turns were in flight, so an
// ordinary message in flight at three kills was set aside as if it had
// ended the process itself. The process is killed ten times at random
// moments with several chats in flight, on each channel: every message
// is answered once, in order, and nothing is quarantined. (The poison
// test in bridge shows a message that does end the process is still set
// aside.)
func TestKillsFromOutsideQuarantineNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for name, setup := range map[string]func(t *testing.T) killedChannel{
		"telegram": killedTelegram,
		"slack":    killedSlack,
		"discord":  killedDiscord,
		"whatsapp": killedWhatsApp,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			killRun(t, setup(t))
		})
	}
}

func killedTelegram(t *testing.T) killedChannel {
	tg := telegramtest.New(t)
	users := make([]string, killChats)
	for c := range users {
		users[c] = strconv.Itoa(1000 + c)
	}
	// Every message is queued at once: ids 1..n in the order pushed. Each
	// chat is a group, where every answer is a reply to its message.
	ids := map[int][2]int{}
	for m := range killMessages {
		for c := range killChats {
			id := tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, ChatID: int64(-1000 - c), ChatType: "group",
				Text: fmt.Sprintf("@%s c%d m%d", telegramtest.BotUserName, c, m)})
			ids[id] = [2]int{c, m}
		}
	}
	return killedChannel{
		config: fmt.Sprintf("telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
			"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
			telegramtest.Token, tg.Endpoint(), strings.Join(users, ", ")),
		send: func(*testing.T, string, int, int) {},
		answers: func() [][]string {
			out := make([][]string, killChats)
			for _, s := range tg.Sent() {
				if cm, ok := ids[s.ReplyTo]; ok {
					out[cm[0]] = append(out[cm[0]], s.Text)
				} else {
					out[-int(s.ChatID)-1000] = append(out[-int(s.ChatID)-1000], s.Text)
				}
			}
			return out
		},
	}
}

func killedSlack(t *testing.T) killedChannel {
	fake := slacktest.NewServer(t)
	const secret = "signing-secret-for-kills"
	return killedChannel{
		config: fmt.Sprintf("slack:\n  enabled: true\n  mode: events\n  bot_token: xoxb-kills\n  signing_secret: %s\n  api_url: %q\n"+
			"  allowed_users: [UOWNER]\n  send_per_channel_second: -1\n", secret, fake.APIURL),
		send: func(t *testing.T, addr string, c, m int) {
			e := slacktest.DM(fmt.Sprintf("D%d", c), "UOWNER", fmt.Sprintf("c%d m%d", c, m), fmt.Sprintf("%d.%06d", 100+m, c))
			body, err := json.Marshal(slacktest.Callback(fmt.Sprintf("Ev%d-%d", c, m), e))
			if err != nil {
				t.Error(err)
				return
			}
			client := &http.Client{Timeout: 3 * time.Second} // Slack's own wait
			deadline := time.Now().Add(2 * time.Minute)
			for retry := 0; time.Now().Before(deadline); retry++ {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
				req.Header = slacktest.Sign(secret, time.Now(), body)
				req.Header.Set("Content-Type", "application/json")
				if retry > 0 {
					req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
					req.Header.Set("X-Slack-Retry-Reason", "http_error")
				}
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("event c%d m%d was never taken", c, m)
		},
		answers: func() [][]string {
			out := make([][]string, killChats)
			for c := range out {
				out[c] = fake.Messages(fmt.Sprintf("D%d", c))
			}
			return out
		},
	}
}

func killedDiscord(t *testing.T) killedChannel {
	dc := discordtest.New(t)
	users := make([]string, killChats)
	for c := range users {
		users[c] = strconv.Itoa(100 + c)
	}
	return killedChannel{
		config: fmt.Sprintf("discord:\n  enabled: true\n  token: %q\n  api_url: %q\n  allowed_users: [%s]\n  send_per_channel_second: -1\n",
			discordtest.Token, dc.APIURL, strings.Join(users, ", ")),
		// Discord does not deliver again what was sent while the process
		// was down: the channel reads it back at its next start.
		send: func(_ *testing.T, _ string, c, m int) {
			dc.Post(discordtest.Message{Author: discordtest.User{ID: users[c], Name: "p" + users[c]}, Channel: dc.DM(users[c]),
				Content: fmt.Sprintf("c%d m%d", c, m)})
			time.Sleep(time.Duration(c*7) * time.Millisecond)
		},
		answers: func() [][]string {
			out := make([][]string, killChats)
			for c := range out {
				for _, s := range dc.Sent(dc.DM(users[c])) {
					out[c] = append(out[c], s.Content)
				}
			}
			return out
		},
		ready: dc.Connected,
	}
}

func killedWhatsApp(t *testing.T) killedChannel {
	wa := whatsapptest.New(t)
	numbers := make([]string, killChats)
	for c := range numbers {
		numbers[c] = fmt.Sprintf("+1555000%04d", c)
	}
	return killedChannel{
		config: fmt.Sprintf("whatsapp:\n  enabled: true\n  access_token: %s\n  phone_number_id: %q\n  app_secret: %s\n  verify_token: %s\n"+
			"  api_url: %q\n  allowed_numbers: [\"%s\"]\n", whatsapptest.Token, whatsapptest.PhoneNumberID, whatsapptest.AppSecret,
			whatsapptest.VerifyToken, wa.APIURL, strings.Join(numbers, `", "`)),
		// Meta delivers a notification again until it is answered 200.
		send: func(t *testing.T, addr string, c, m int) {
			_, body := wa.Body(whatsapptest.Message{From: strings.TrimPrefix(numbers[c], "+"), ID: fmt.Sprintf("wamid.c%dm%d", c, m),
				Text: fmt.Sprintf("c%d m%d", c, m)})
			sig := whatsapptest.Sign(whatsapptest.AppSecret, body)
			client := &http.Client{Timeout: 3 * time.Second}
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/whatsapp/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Hub-Signature-256", sig)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("message c%d m%d was never taken", c, m)
		},
		answers: func() [][]string {
			out := make([][]string, killChats)
			for c := range out {
				out[c] = wa.Texts(strings.TrimPrefix(numbers[c], "+"))
			}
			return out
		},
	}
}

// killRun runs loadout serve on ch, kills it killKills times at random
// moments and starts it again at once, then checks each chat's answers.
func killRun(t *testing.T, ch killedChannel) {
	dir := t.TempDir()
	model := chattest.NewModelServer(t)
	model.Forget = true
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var rmu sync.Mutex
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		asked := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				asked = m.Content
			}
		}
		rmu.Lock()
		delay := time.Duration(200+rng.IntN(400)) * time.Millisecond
		rmu.Unlock()
		asked = strings.TrimSpace(strings.TrimPrefix(asked, "@"+telegramtest.BotUserName))
		return chattest.Step{Text: "Answer to " + asked, Delay: delay}
	}
	addr := freePort(t)
	path := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-kills\nstore:\n  path: %s\nhttp:\n  listen: %s\n  metrics: false\nlog:\n  level: info\n%s",
		model.URL, filepath.Join(dir, "loadout.db"), addr, ch.config)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		cmd  *exec.Cmd
		done chan struct{} // closed when cmd has exited
		logs bytes.Buffer
	)
	start := func() {
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=serve -config "+path)
		c.Stderr = &lockedWriter{mu: &mu, w: &logs}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { c.Wait(); close(exited) }()
		mu.Lock()
		cmd, done = c, exited
		mu.Unlock()
		t.Cleanup(func() { c.Process.Kill(); <-exited })
	}
	start()
	if ch.ready != nil {
		chattest.Eventually(t, "the first process to reach the platform", ch.ready)
	}
	// Each chat's person writes in order, each message once the one
	// before was taken; the chats write at once.
	var senders sync.WaitGroup
	for c := range killChats {
		senders.Go(func() {
			for m := range killMessages {
				ch.send(t, addr, c, m)
			}
		})
	}
	answered := func() int {
		n := 0
		for _, a := range ch.answers() {
			n += len(a)
		}
		return n
	}
	total := killChats * killMessages
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for answered() < total || kills < killKills {
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("after 3 minutes and %d kills, %d of %d messages are answered:\n%q\n%s", kills, answered(), total, ch.answers(), logs.String())
		}
		if kills < killKills {
			// A random moment, unrelated to what the process is doing.
			rmu.Lock()
			wait := time.Duration(20+rng.IntN(500)) * time.Millisecond
			rmu.Unlock()
			time.Sleep(wait)
			mu.Lock()
			cmd.Process.Signal(syscall.SIGKILL)
			exited := done
			mu.Unlock()
			<-exited
			kills++
			start()
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	senders.Wait()
	time.Sleep(time.Second) // anything sent twice arrives now
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if strings.Contains(log, "quarantine") {
		t.Errorf("a message was quarantined:\n%s", grepLines(log, "quarantine"))
	}
	if d := os.Getenv("LOADOUT_TEST_KILL_LOG"); d != "" {
		os.WriteFile(d, []byte(log), 0o600)
	}
	doubled := 0
	for c, got := range ch.answers() {
		var want []string
		for m := range killMessages {
			want = append(want, fmt.Sprintf("Answer to c%d m%d", c, m))
		}
		// A part the platform took as the process died, before it could
		// hear so, goes again after the restart: the one repeat no
		// channel can rule out, and never more than once a kill.
		once := slices.Compact(slices.Clone(got))
		doubled += len(got) - len(once)
		if strings.Join(once, "\n") != strings.Join(want, "\n") {
			t.Errorf("chat %d was answered %q, want %q", c, got, want)
		}
	}
	if doubled > kills {
		t.Errorf("%d answers went twice in %d kills", doubled, kills)
	}
	t.Logf("%d messages in %d chats, %d kills; %d answers sent again after a kill", total, killChats, kills, doubled)
}

// lockedWriter writes to w under mu: the logs of one life and the next
// may overlap for a moment.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func grepLines(text, word string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// freePort is a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
