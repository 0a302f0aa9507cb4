package webui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/webui"
	"loadout/bridge/webui/webuitest"
	"loadout/chat/chattest"
	"loadout/httpd"
	"loadout/tools/files"
)

// The browser chat passes the channel conformance suite: people signed
// in by a stand-in of the web side's sessions, each with their page's
// requests over real HTTP (the process's server, with its limits) and
// their page's Server-Sent Events stream, which reconnects to the next
// process with Last-Event-ID.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{})
}

const chats = 3

type conformance struct {
	mu      sync.Mutex
	owner   *testing.T
	auth    *webuitest.Auth
	people  []*webuitest.Person
	base    string
	pending map[string]string // a sent message's id → its text
}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: chats, Redeliver: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

// server is one process's chat: the channel, built as serve builds it,
// on an HTTP server with the process's limits.
type server struct {
	Chat *webui.Chat
	URL  string
	stop func()
}

// startServer builds and runs the channel with env and serves it.
func startServer(t testing.TB, auth bridge.WebAuth, env bridge.Env, cfg webui.Config) *server {
	t.Helper()
	return startServerAt(t, "", auth, env, cfg)
}

// startServerAt is startServer on addr ("": any port).
func startServerAt(t testing.TB, addr string, auth bridge.WebAuth, env bridge.Env, cfg webui.Config) *server {
	t.Helper()
	mux := http.NewServeMux()
	env.Mux, env.Web = mux, auth
	cfg.Enabled = true
	ch, err := webui.Kind().Build(context.Background(), cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	var hub bridge.Hub
	hub.Add(ch, mux)
	srv := httptest.NewUnstartedServer(mux)
	if addr != "" {
		srv.Listener.Close()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener = ln
	}
	srv.Config = httpd.Server(mux, httpd.DefaultLimits, slog.New(slog.DiscardHandler))
	srv.Start()
	t.Cleanup(srv.Close)
	running := bridgetest.Running(t, ch)
	stop := func() { running(); srv.Close() }
	chattest.Eventually(t, "the channel to be ready", ch.(bridge.Readier).Ready)
	return &server{Chat: ch.(*webui.Chat), URL: srv.URL, stop: stop}
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	c.mu.Lock()
	if c.owner != t {
		c.owner, c.auth, c.pending = t, webuitest.NewAuth(), map[string]string{}
		c.people = nil
		for i := range chats {
			p := webuitest.NewPerson(c.auth, fmt.Sprintf("telegram:%d", 100+i))
			t.Cleanup(p.Close)
			c.people = append(c.people, p)
		}
	}
	c.mu.Unlock()
	d := b.Delivery
	if d.Files == nil {
		// The process always gives the chats' files.
		ws, err := files.New(files.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		d.Files = ws
	}
	s := startServer(t, c.auth, bridge.Env{Router: bridge.NewRouter(b.Env.Engine, "loadout"), Store: b.Env.Store, Delivery: d},
		webui.Config{Whole: !b.Stream})
	c.mu.Lock()
	c.base = s.URL
	c.mu.Unlock()
	for _, p := range c.people {
		p.Connect(t, s.URL)
	}
	return s.Chat, s.stop
}

func (c *conformance) url() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base
}

func (c *conformance) ChatKey(i int) string { return webui.ChatKey(c.people[i].User) }

func (c *conformance) Send(t *testing.T, i int, text string) string {
	id := c.people[i].Send(t, c.url(), text, nil)
	c.mu.Lock()
	c.pending[id] = text
	c.mu.Unlock()
	return id
}

// Redeliver sends the message again under its id, as a page does when
// the answer to its request was lost.
func (c *conformance) Redeliver(t *testing.T, i int, ref string) {
	c.mu.Lock()
	text := c.pending[ref]
	c.mu.Unlock()
	c.people[i].SendAs(t, c.url(), ref, text, nil)
}

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	return c.people[i].Send(t, c.url(), text, map[string][]byte{name: content})
}

func (c *conformance) Answers(i int) []string { return c.people[i].Answers() }

// Uploads are the files the page offers, downloaded. The page learns of
// a file on its stream, a moment after the channel took it: they are
// read once one has arrived (or after the suite's wait).
func (c *conformance) Uploads(i int) map[string][]byte {
	deadline := time.Now().Add(bridgetest.Wait)
	for time.Now().Before(deadline) {
		if up := c.people[i].Uploads(); len(up) > 0 {
			return up
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.people[i].Uploads()
}

// Approve presses the last question's Approve button.
func (c *conformance) Approve(t *testing.T, i int) {
	p := c.people[i]
	var ask webuitest.Event
	chattest.Eventually(t, "a question", func() bool {
		var ok bool
		ask, ok = p.LastAsk()
		return ok
	})
	status, msg, err := p.Press(c.url(), ask.Approval, "approve")
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("Approve: %d %q %v", status, msg, err)
	}
}

func (c *conformance) Hold(int)  {}
func (c *conformance) Release()  {}
func (c *conformance) Held() int { return 0 }
