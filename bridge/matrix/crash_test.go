package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/matrix/matrixtest"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/chat/openai"
	"loadout/store"
	"loadout/store/storetest"
	"loadout/tools"
)

// childVar carries a bot process's configuration (childConfig as JSON)
// to the test binary run as that process.
const childVar = "LOADOUT_TEST_MATRIX_CHILD"

// childConfig is what a bot process needs: the homeserver and the
// account, the database, and the model server.
type childConfig struct {
	Homeserver, User, Password string
	Allowed                    []string
	DB, Model, Log             string
}

// child is one life of the bot in a process of its own, until it is
// killed.
func child(raw string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf, err := os.OpenFile(c.Log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 1
	}
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := store.OpenTest(c.DB)
	if err != nil {
		log.Error("open", "err", err)
		return 1
	}
	reg := tools.NewRegistry()
	reg.Add(tools.LoadGroup(reg))
	model := openai.New(openai.Config{BaseURL: c.Model, APIKey: "test-key", Backoff: time.Millisecond, Attempts: 3, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	engine := chat.New(chat.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, model, st, reg)
	sqlDB, _ := st.Gorm().DB()
	a, err := New(Config{HomeserverURL: c.Homeserver, UserID: c.User, Password: c.Password, PickleKey: botPickleKey, AllowedUsers: c.Allowed,
		SyncTimeout: time.Second, Delivery: bridge.Delivery{Logger: log, ShutdownGrace: time.Nanosecond}},
		bridge.NewRouter(engine, "loadout"), st, bridge.SQL{DB: sqlDB, Dialect: st.Gorm().Dialector.Name()})
	if err != nil {
		log.Error("new", "err", err)
		return 1
	}
	if err := a.Run(context.Background()); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// Killed (SIGKILL) again and again while two people talk to it, the bot
// loses nothing and says nothing twice: every message is answered
// exactly once, and each reached the model once. The sync token is
// stored only after a sync's events are in the inbox, so a process
// killed between the two reads the sync again; the inbox drops what it
// has, and a part the homeserver took before the kill goes out again
// under the same transaction, which the homeserver recognises.
func TestKilledBotLosesAndDoublesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes for a while")
	}
	w := newWorld(t, matrixtest.Encryption())
	model := chattest.NewModelServer(t)
	model.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		return chattest.Step{Text: "echo: " + req.Messages[len(req.Messages)-1].Content, Delay: time.Duration(rand.IntN(150)) * time.Millisecond}
	}
	dir := t.TempDir()
	cfg, _ := json.Marshal(childConfig{Homeserver: w.hs.URL, User: string(w.bot), Password: botPassword,
		Allowed: []string{string(w.people[0].ID()), string(w.people[1].ID())},
		DB:      filepath.Join(dir, "loadout.db"), Model: model.URL, Log: filepath.Join(dir, "bot.log")})
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childVar+"="+string(cfg))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	bot := start()
	for i, p := range w.people {
		p.WaitJoined(t, w.rooms[i], w.bot)
	}
	const n = 12
	var said sync.WaitGroup
	for i := range w.people {
		said.Add(1)
		go func() {
			defer said.Done()
			for k := range n {
				w.say(t, i, fmt.Sprintf("message %d-%d", i, k))
				time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
			}
		}()
	}
	// Kill the bot at random moments while the people talk, and start
	// it again each time.
	stopKilling := make(chan struct{})
	killed := 0
	go func() { said.Wait(); close(stopKilling) }()
	for done := false; !done; {
		select {
		case <-stopKilling:
			done = true
		case <-time.After(time.Duration(300+rand.IntN(900)) * time.Millisecond):
			bot.Process.Kill()
			bot.Wait()
			killed++
			bot = start()
		}
	}
	t.Cleanup(func() { bot.Process.Kill(); bot.Wait() })
	want := func(i int) []string {
		var out []string
		for k := range n {
			out = append(out, fmt.Sprintf("echo: message %d-%d", i, k))
		}
		return out
	}
	for i := range w.people {
		deadline := time.Now().Add(90 * time.Second)
		for len(w.answers(i)) < n && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // what would come twice has the time to
	for i := range w.people {
		got := w.answers(i)
		seen := map[string]int{}
		for _, a := range got {
			seen[a]++
		}
		for _, a := range want(i) {
			if seen[a] != 1 {
				for _, e := range w.people[i].Events(w.rooms[i]) {
					if m := e.Content.AsMessage(); m != nil && m.Body == a {
						t.Logf("%s %s", e.ID, time.UnixMilli(e.Timestamp).Format("15:04:05.000"))
					}
				}
				log, _ := os.ReadFile(filepath.Join(dir, "bot.log"))
				t.Fatalf("chat %d: %q answered %d times after %d kills; answers %q\nlog tail: %s", i, a, seen[a], killed, got, bridgetest.Tail(string(log), 400000))
			}
		}
		if len(got) != n {
			t.Fatalf("chat %d: %d answers, want %d: %q", i, len(got), n, got)
		}
	}
	asked := map[string]int{}
	for _, r := range model.Requests() {
		asked[r.Messages[len(r.Messages)-1].Content]++
	}
	env := storetest.NewEnv(t, storetest.Options{DBPath: filepath.Join(dir, "loadout.db"), Model: model})
	for i := range w.people {
		for k := range n {
			text := fmt.Sprintf("message %d-%d", i, k)
			var c int
			env.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE role = 'user' AND text = ?", text).Scan(&c)
			if c != 1 {
				t.Fatalf("%q is in the history %d times (the model was asked %d times)", text, c, asked[text])
			}
		}
	}
	t.Logf("%d kills; %d messages answered once each", killed, 2*n)
}
