package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"loadout/bridge/webui"
	"loadout/bridge/webui/webuitest"
	"loadout/chat/chattest"
	"loadout/settings"
)

// serve with webui.enabled builds the browser chat from its section,
// mounts it on the process's server and answers a signed-in person
// through the engine and store: their message, and a scheduled task's
// run in their chat (the hub reaches it by its key). The chat is private
// and the turn runs as the person's own user key.
func TestTheBrowserChatInServe(t *testing.T) {
	model := chattest.NewModelServer(t)
	raw := fmt.Sprintf("llm:\n  base_url: %s\n  api_key: sk-test\nstore:\n  path: %s\nhttp:\n  shutdown_grace: 5s\nwebui:\n  enabled: true\n  max_upload_mb: 2\n",
		model.URL, filepath.Join(t.TempDir(), "loadout.db"))
	cfg, err := settings.Parse([]byte(raw), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	auth := webuitest.NewAuth()
	a.web = auth
	chans, err := a.channels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(chans) != 1 || chans[0].Name() != "webui" {
		t.Fatalf("channels %v", chans)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, a, ln, chans)
	base := "http://" + ln.Addr().String()
	ana := webuitest.NewPerson(auth, "telegram:42")
	t.Cleanup(ana.Close)
	chattest.Eventually(t, "the channel ready", func() bool { return len(a.hub.NotReady()) == 0 && a.hub.Private(webui.ChatKey("telegram:42")) })
	ana.Connect(t, base)
	model.Text("Hello from the server.")
	ana.Send(t, base, "hi", nil)
	chattest.Eventually(t, "the answer", func() bool { return slices.Equal(ana.Answers(), []string{"Hello from the server."}) })
	model.Text("Time to stretch.")
	if err := a.hub.Submit(context.Background(), webui.ChatKey("telegram:42"), "telegram:42", "task:1:run", "remind me to stretch"); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "the task's answer", func() bool { return slices.Contains(ana.Answers(), "Time to stretch.") })
	var users []string
	a.db.Gorm().Raw("SELECT DISTINCT user_key FROM inbox_items WHERE channel = 'webui'").Scan(&users)
	if !slices.Equal(users, []string{"telegram:42"}) {
		t.Fatalf("turns ran as %q", users)
	}
	// The section's cap holds on the process's server.
	status, msg, err := ana.Post(base, "/chat/send", map[string][]string{"id": {"abcdefgh-big"}},
		map[string]map[string][]byte{"file": {"big.bin": make([]byte, 3<<20)}})
	if err != nil || status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %q %v", status, msg, err)
	}
}

// webui.enabled without the web side is refused at start, naming both
// keys, before anything listens.
func TestServeRefusesTheBrowserChatWithoutTheWebSide(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "webui:\n  enabled: true\n")
	_, err := runCLI(t, "", "-config", cfgPath, "serve")
	if err == nil || !strings.Contains(err.Error(), "webui.enabled") || !strings.Contains(err.Error(), "ui.enabled") {
		t.Fatalf("err %v", err)
	}
	cfgPath, _ = writeConfig(t, model.URL, "webui:\n  enabled: true\n  max_upload_mb: -1\n")
	_, err = runCLI(t, "", "-config", cfgPath, "serve")
	if err == nil || !strings.Contains(err.Error(), "webui.max_upload_mb") {
		t.Fatalf("err %v", err)
	}
}

// With webui.enabled off nothing of it is built: no channel, no route.
func TestTheBrowserChatIsAbsentWhenDisabled(t *testing.T) {
	a, ln := bareApp(t)
	chans, err := a.channels(context.Background())
	if err != nil || len(chans) != 0 {
		t.Fatalf("%v %v", chans, err)
	}
	startRun(t, a, ln, chans)
	for _, path := range []string{"/chat", "/chat/stream"} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
}

// A person of the browser chat is known by another channel's key, so
// the -user example never offers "webui:…" as one; serve's help lists
// the channel.
func TestWebuiIsNoUserKeysPrefix(t *testing.T) {
	if got := settings.ChannelKinds().ExampleUser(); strings.Contains(got, "webui") || !strings.Contains(got, "telegram:…") {
		t.Fatalf("settings.ChannelKinds().ExampleUser() = %q", got)
	}
	if got := settings.ChannelKinds().Names("", "and"); !strings.HasSuffix(got, "and webui") {
		t.Fatalf("channelNames = %q", got)
	}
}
