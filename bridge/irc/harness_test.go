package irc

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/irc/irctest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// network is the one IRC network the package's tests share.
var network irctest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	network.Close()
	os.Exit(code)
}

// Accounts of the tests: the bot's, and those of the people allowed.
const (
	botNick     = "loadout"
	botPassword = "bot-password-in-tests"
	pw          = "person-password"
)

// world is one test's share of the network: the people (Ana and Bea,
// signed in to their accounts), the holder of the bot's lines, and the
// bot's log, shared by the bot's processes.
type world struct {
	n      *irctest.Network
	people []*irctest.Person
	hold   *holder
	logs   *chattest.LogBuffer

	mu  sync.Mutex
	bot *Adapter // the running process's
	env *storetest.Env
}

func newWorld(t *testing.T) *world {
	n := network.Get(t)
	w := &world{n: n, hold: &holder{}, logs: &chattest.LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bot's log:\n%s", w.logs.String())
		}
	})
	n.Account(t, botNick, botPassword)
	for _, name := range []string{"ana", "bea"} {
		n.Account(t, name, pw)
		w.people = append(w.people, n.Connect(t, name, name, pw))
	}
	return w
}

// config is the bot's configuration in w: TLS with the network's CA,
// no pacing.
func (w *world) config(d bridge.Delivery) Config {
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{Server: w.n.TLS, CAFile: w.n.CAFile, Nick: botNick, Password: botPassword,
		AllowedNicks: []string{"Ana", "bea"}, LineEvery: -1, Conn: w.hold.Wrap, Delivery: d}
}

// start runs the bot on env's database as a new process would, and
// returns once it is connected, with the function that stops it.
func (w *world) start(t *testing.T, env *storetest.Env, cfg Config) (*Adapter, func()) {
	t.Helper()
	a := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	bridgetest.WaitFor(t, "the bot connected", nil, func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		default:
		}
		return a.Ready()
	})
	w.mu.Lock()
	w.bot, w.env = a, env
	w.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// say sends text as person i to the bot, privately, and waits until the
// bot has stored it.
func (w *world) say(t *testing.T, i int, text string) { w.sayAs(t, i, text, text) }

// sayAs is say for a text the bot stores as kept.
func (w *world) sayAs(t *testing.T, i int, text, kept string) {
	t.Helper()
	w.mu.Lock()
	a, env := w.bot, w.env
	w.mu.Unlock()
	before := stored(env, kept)
	w.people[i].Say(t, a.Nick(), text)
	bridgetest.WaitFor(t, "the message stored", nil, func() bool { return stored(env, kept) > before })
}

// stored counts the IRC events in env's inbox with text.
func stored(env *storetest.Env, text string) int {
	var n int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items WHERE channel = 'irc' AND text = ?", text).Scan(&n)
	return n
}

// answers are the bot's private messages to person i.
func (w *world) answers(i int) []string { return w.people[i].From(botNick, "") }

// code is the code of the last question in answers.
func code(t *testing.T, answers []string) string {
	t.Helper()
	re := regexp.MustCompile(`/approve (#\w+)`)
	for i := len(answers) - 1; i >= 0; i-- {
		if m := re.FindStringSubmatch(answers[i]); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no question in %q", answers)
	return ""
}

// contains reports whether any of lines holds part.
func anyHas(lines []string, part string) bool {
	return strings.Contains(strings.Join(lines, "\n"), part)
}
