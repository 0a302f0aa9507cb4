package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/slack/slacktest"
	"loadout/chat/chattest"
)

// Slack passes the channel conformance suite over Socket Mode and over
// the Events API.
func TestConformance(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeEvents} {
		t.Run(mode, func(t *testing.T) { bridgetest.Run(t, &conformance{mode: mode}) })
	}
}

// conformance is the suite's harness: the direct messages D1 (the owner)
// and D2 (Bea).
type conformance struct {
	bridgetest.Fakes[*slacktest.Server]
	mode string
	mu   sync.Mutex
	url  string // the Events API server, in events mode
	n    int    // events and envelopes sent
	sent map[string][]byte
}

var dms = []struct{ channel, user string }{{"D1", owner}, {"D2", "UBEA"}}

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, Hold: true, Buttons: true, Stream: true, FilesIn: true, FilesOut: true}
}

func (c *conformance) server(t *testing.T) *slacktest.Server {
	return c.For(t, func(t testing.TB) *slacktest.Server {
		c.mu.Lock()
		c.sent = map[string][]byte{}
		c.mu.Unlock()
		return slacktest.NewServer(t)
	})
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	fake := c.server(t)
	d := b.Delivery
	d.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a := New(Config{BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: secret, Mode: c.mode, APIURL: fake.APIURL,
		AllowedUsers: []string{owner, "UBEA"}, Backoff: time.Millisecond, SendPerChannelSecond: -1, Stream: b.Stream, Delivery: d},
		bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	conns := fake.Connections()
	running := bridgetest.Running(t, a)
	var srv *httptest.Server
	if c.mode == ModeEvents {
		mux := http.NewServeMux()
		a.Mount(mux)
		srv = httptest.NewServer(mux)
		c.mu.Lock()
		c.url = srv.URL
		c.mu.Unlock()
	}
	stop := func() {
		running()
		if srv != nil {
			srv.Close()
		}
	}
	t.Cleanup(stop)
	if c.mode == ModeSocket {
		fake.WaitFor(t, "a new socket mode connection", func() bool { return fake.Connections() > conns })
	}
	chattest.Eventually(t, "connected", a.Ready)
	return a, stop
}

func (c *conformance) ChatKey(i int) string {
	return "slack:" + slacktest.TeamID + ":" + dms[i].channel
}

// deliver sends an Events API callback as Slack does, over the
// connection or to the endpoint, and waits for its acknowledgement.
func (c *conformance) deliver(t *testing.T, typ string, payload any, retry int) {
	t.Helper()
	c.mu.Lock()
	c.n++
	n, url := c.n, c.url
	c.mu.Unlock()
	if c.mode == ModeSocket {
		id := fmt.Sprintf("env-%d", n)
		c.Fake().Send(t, id, typ, payload, retry)
		c.Fake().WaitAck(t, id)
		return
	}
	var body []byte
	path, ctype := "/slack/events", "application/json"
	if typ == "interactive" {
		body, path, ctype = slacktest.Interactivity(payload.(map[string]any)), "/slack/interactivity", "application/x-www-form-urlencoded"
	} else {
		body, _ = json.Marshal(payload)
	}
	req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	req.Header = slacktest.Sign(secret, time.Now(), body)
	req.Header.Set("Content-Type", ctype)
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := (&http.Client{Timeout: bridgetest.Wait}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %v", path, resp, err)
	}
	resp.Body.Close()
}

func (c *conformance) event(t *testing.T, e slacktest.Event) string {
	c.mu.Lock()
	id := fmt.Sprintf("Ev%d", c.n+1)
	c.mu.Unlock()
	payload := slacktest.Callback(id, e)
	b, _ := json.Marshal(payload)
	c.mu.Lock()
	c.sent[id] = b
	c.mu.Unlock()
	c.deliver(t, "events_api", payload, 0)
	return id
}

func (c *conformance) ts() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("100.%d", c.n+1)
}

func (c *conformance) Send(t *testing.T, i int, text string) string {
	return c.event(t, slacktest.DM(dms[i].channel, dms[i].user, text, c.ts()))
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) {
	c.mu.Lock()
	b := c.sent[ref]
	c.mu.Unlock()
	var payload map[string]any
	json.Unmarshal(b, &payload)
	c.deliver(t, "events_api", payload, 1)
}

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	fake := c.server(t)
	return c.event(t, fake.DMWithFile(dms[i].channel, dms[i].user, text, c.ts(), slacktest.File{Name: name, MIME: "text/plain", Content: content}))
}

func (c *conformance) Answers(i int) []string { return c.Fake().Messages(dms[i].channel) }

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, u := range c.Fake().Uploads() {
		if u.Channel == dms[i].channel {
			out[u.Title] = u.Content
		}
	}
	return out
}

func (c *conformance) Approve(t *testing.T, i int) {
	var posts []slacktest.Call
	for _, p := range c.Fake().Calls("chat.postMessage") {
		if p.Params["channel"] == dms[i].channel {
			posts = append(posts, p)
		}
	}
	ts, text, value := question(t, c.Fake(), posts)
	c.deliver(t, "interactive", slacktest.BlockAction(dms[i].user, dms[i].channel, "", ts, text, actionApprove, value), 0)
}

func (c *conformance) Hold(n int) { c.Fake().Hold("chat.postMessage", n) }

func (c *conformance) Held() int { return c.Fake().Waiting("chat.postMessage") }

// Release waits until the post the stop abandoned has ended, so it is
// not let through after the fact, then lets posts through.
func (c *conformance) Release() {
	c.Fake().WaitFor(c.Owner(), "the abandoned post to end", func() bool { return c.Fake().Waiting("chat.postMessage") == 0 })
	c.Fake().Release("chat.postMessage")
}

// What the Slack channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Mounter    = (*Adapter)(nil)
	_ bridge.Indicator  = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
	_ bridge.Drafter    = (*Adapter)(nil)
	_ bridge.Speaker    = (*Adapter)(nil)
	_ bridge.Inviter    = (*Adapter)(nil)
)
