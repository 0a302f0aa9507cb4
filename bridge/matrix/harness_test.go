package matrix

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/bridge/matrix/matrixtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// homeserver is the one Dendrite the package's tests share; each test
// makes rooms, people's devices and a bot device of its own.
var homeserver matrixtest.Shared

func TestMain(m *testing.M) {
	if raw := os.Getenv(childVar); raw != "" {
		os.Exit(child(raw))
	}
	code := m.Run()
	homeserver.Close()
	os.Exit(code)
}

const botPassword = "pw-loadout-bot-secret"

// botPickleKey is the bot's matrix.pickle_key in every test.
const botPickleKey = "pickle-key-of-the-bot-in-tests-0123456789"

// world is one test's share of the homeserver: the bot's account, two
// people (Ana and Bea) with a direct chat each, and the transport
// between the bot and the homeserver, shared by the bot's processes.
type world struct {
	hs        *matrixtest.Server
	bot       id.UserID
	people    []*matrixtest.Person
	rooms     []id.RoomID
	encrypted bool
	tr        *transport
	logs      *chattest.LogBuffer
}

func newWorld(t *testing.T, encrypted bool) *world {
	hs := homeserver.Get(t)
	w := &world{hs: hs, encrypted: encrypted, tr: newTransport(), logs: &chattest.LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bot's log:\n%s", w.logs.String())
		}
	})
	w.bot = id.UserID(hs.Account(t, "loadout", botPassword))
	for _, name := range []string{"ana", "bea"} {
		p := hs.Person(t, name, encrypted)
		w.people = append(w.people, p)
		w.rooms = append(w.rooms, p.Room(t, encrypted, w.bot))
	}
	return w
}

// config is the bot's configuration in w.
func (w *world) config(d bridge.Delivery) Config {
	d.HTTPClient = &http.Client{Transport: w.tr}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{HomeserverURL: w.hs.URL, UserID: string(w.bot), Password: botPassword, PickleKey: botPickleKey,
		AllowedUsers: []string{string(w.people[0].ID()), string(w.people[1].ID())},
		SyncTimeout:  2 * time.Second, KeyWait: 5 * time.Second, Delivery: d}
}

// start runs the bot on env's database as a new process would, and
// returns once it has joined the people's rooms.
func (w *world) start(t *testing.T, env *storetest.Env, cfg Config) (*Adapter, func()) {
	t.Helper()
	a, stop, done := w.run(t, env, cfg)
	matrixtest.Eventually(t, "the bot connected", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		default:
		}
		return a.Ready()
	})
	for i, p := range w.people {
		p.WaitJoined(t, w.rooms[i], w.bot)
	}
	return a, stop
}

// run runs the bot on env's database as a new process would, without
// waiting for anything; done receives Run's error if it returns before
// stop.
func (w *world) run(t *testing.T, env *storetest.Env, cfg Config) (a *Adapter, stop func(), done <-chan error) {
	t.Helper()
	sqlDB, err := env.Store.Gorm().DB()
	if err != nil {
		t.Fatal(err)
	}
	a, err = New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store, bridge.SQL{DB: sqlDB, Dialect: env.Store.Gorm().Dialector.Name()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	early := make(chan error, 1)
	var (
		mu       sync.Mutex
		stopping bool
		runErr   error // of a Run that returned after stop
	)
	go func() {
		err := a.Run(ctx)
		mu.Lock()
		if stopping {
			runErr = err
		} else {
			early <- err
		}
		mu.Unlock()
		close(ended)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			mu.Lock()
			stopping = true
			mu.Unlock()
			cancel()
			select {
			case <-ended:
				if runErr != nil {
					t.Errorf("Run: %v", runErr)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return a, stop, early
}

// say sends text as person i in their room.
func (w *world) say(t *testing.T, i int, text string) id.EventID {
	return w.people[i].Say(t, w.rooms[i], &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

// share sends a file as person i, encrypted in an encrypted room, with
// text as its caption.
func (w *world) share(t *testing.T, i int, name string, data []byte, text string) id.EventID {
	p := w.people[i]
	c := &event.MessageEventContent{MsgType: event.MsgFile, Body: text, FileName: name,
		Info: &event.FileInfo{MimeType: "text/plain", Size: len(data)}}
	if text == "" {
		c.Body = name
	}
	ctx := context.Background()
	if w.encrypted {
		f := attachment.NewEncryptedFile()
		res, err := p.Client.UploadBytes(ctx, f.Encrypt(data), "application/octet-stream")
		if err != nil {
			t.Fatal(err)
		}
		c.File = &event.EncryptedFileInfo{EncryptedFile: *f, URL: res.ContentURI.CUString()}
	} else {
		res, err := p.Client.UploadBytesWithName(ctx, data, "text/plain", name)
		if err != nil {
			t.Fatal(err)
		}
		c.URL = res.ContentURI.CUString()
	}
	return p.Say(t, w.rooms[i], c)
}

// answers are the bot's messages in room i as person i reads them.
func (w *world) answers(i int) []string {
	var out []string
	for _, s := range w.people[i].Texts(w.rooms[i], w.bot) {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// lastQuestion is the bot's last message in room i that asks for an
// approval.
func (w *world) lastQuestion(t *testing.T, i int) id.EventID {
	evs := w.people[i].Events(w.rooms[i])
	for k := len(evs) - 1; k >= 0; k-- {
		c := evs[k].Content.AsMessage()
		if evs[k].Sender == w.bot && evs[k].Type == event.EventMessage && c != nil && strings.Contains(c.Body, "/approve") {
			return evs[k].ID
		}
	}
	t.Fatal("no question from the bot")
	return ""
}

// react reacts to ev in room i as person p.
func (w *world) react(t *testing.T, p *matrixtest.Person, i int, ev id.EventID, key string) {
	if _, err := p.Client.SendReaction(context.Background(), w.rooms[i], ev, key); err != nil {
		t.Fatal(err)
	}
}

// inInbox waits until env's inbox holds the event ref.
func inInbox(t *testing.T, env *storetest.Env, ref string) {
	t.Helper()
	matrixtest.Eventually(t, "the event stored", func() bool {
		var n int
		env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items WHERE channel = 'matrix' AND event_id = ?", ref).Scan(&n)
		return n == 1
	})
}

// transport is the bot's way to the homeserver, which a test can hold
// (the bot's messages, after the next n) and make deliver an old sync
// again, as after a lost acknowledgement.
type transport struct {
	base http.RoundTripper

	mu        sync.Mutex
	holding   bool
	pass      int
	waiting   int
	release   chan struct{}
	syncs     [][]byte
	replay    []byte
	replayed  int
	sends     int
	syncCalls int
	// keys, while not nil, holds the bot's uploads of its keys until it
	// is closed.
	keys chan struct{}
}

func newTransport() *transport {
	return &transport{base: http.DefaultTransport, release: make(chan struct{})}
}

func isSend(r *http.Request) bool {
	return r.Method == http.MethodPut && (strings.Contains(r.URL.Path, "/send/m.room.message/") || strings.Contains(r.URL.Path, "/send/m.room.encrypted/"))
}

func isSync(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/sync") }

func isKeysUpload(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/keys/upload") }

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case isKeysUpload(r):
		tr.mu.Lock()
		held := tr.keys
		tr.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	case isSend(r):
		tr.mu.Lock()
		tr.sends++
		if tr.holding && tr.pass == 0 {
			tr.waiting++
			ch := tr.release
			tr.mu.Unlock()
			defer func() { tr.mu.Lock(); tr.waiting--; tr.mu.Unlock() }()
			select {
			case <-ch:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		} else {
			if tr.holding {
				tr.pass--
			}
			tr.mu.Unlock()
		}
	case isSync(r):
		tr.mu.Lock()
		tr.syncCalls++
		if body := tr.replay; body != nil {
			tr.replay = nil
			tr.replayed++
			tr.mu.Unlock()
			return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		}
		tr.mu.Unlock()
		resp, err := tr.base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		tr.mu.Lock()
		tr.syncs = append(tr.syncs, body)
		tr.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	return tr.base.RoundTrip(r)
}

// redeliver makes the next sync answer again with the sync that
// delivered ref, and waits until it has.
func (tr *transport) redeliver(t *testing.T, ref string) {
	t.Helper()
	tr.mu.Lock()
	var body []byte
	for k := len(tr.syncs) - 1; k >= 0; k-- {
		if bytes.Contains(tr.syncs[k], []byte(`"`+ref+`"`)) {
			body = tr.syncs[k]
			break
		}
	}
	n := tr.replayed
	tr.replay = body
	tr.mu.Unlock()
	if body == nil {
		t.Fatalf("no sync delivered %s", ref)
	}
	matrixtest.Eventually(t, "the sync delivered again", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.replayed > n
	})
}

// hold lets the next n messages through, then holds the rest.
func (tr *transport) hold(n int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.holding, tr.pass = true, n
}

// releaseAll waits until no message is held (the stop abandoned them),
// then lets them through.
func (tr *transport) releaseAll(t testing.TB) {
	matrixtest.Eventually(t, "the abandoned send to end", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.waiting == 0
	})
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.holding = false
	close(tr.release)
	tr.release = make(chan struct{})
}

// holdKeys holds the bot's uploads of its keys (one-time keys) while on.
func (tr *transport) holdKeys(on bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case on && tr.keys == nil:
		tr.keys = make(chan struct{})
	case !on && tr.keys != nil:
		close(tr.keys)
		tr.keys = nil
	}
}
