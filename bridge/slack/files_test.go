package slack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"
	"loadout/tools/files"

	"loadout/chat/chattest"
)

// A file whose body is larger than the most loadout downloads, though
// Slack stated less, is refused whole: never kept cut short as if it
// were the file.
func TestAFileLargerThanStatedIsNotKeptCut(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir(), MaxFileBytes: 128 << 20, MaxWorkspaceBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, options{files: ws})
	h.env.Model.Text("ok")
	h.event(t, "Ev1", h.fake.DMWithFile("D1", owner, "the data", "100.1",
		slacktest.File{Name: "big.csv", MIME: "text/csv", Content: make([]byte, maxDownload+10), Stated: 1000}))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	last := h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "big.csv, but it could not be kept: it is larger than 50 MB") {
		t.Errorf("the model read %q", got)
	}
	if entries, _ := os.ReadDir(ws.Dir("slack:" + slacktest.TeamID + ":D1")); len(entries) != 0 {
		t.Errorf("the workspace keeps %v", entries)
	}
}

// A file shared in a direct message is saved in the chat's workspace and
// described to the model before the message's text; the bot token goes
// only to Slack.
func TestSharedFilesAreKept(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, options{files: ws})
	h.env.Model.Text("Got it.")
	h.event(t, "Ev1", h.fake.DMWithFile("D1", owner, "please summarize", "100.1",
		slacktest.File{Name: "minutes.txt", MIME: "text/plain", Content: []byte("we agreed")}))
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	last := h.env.Model.Last(t).Messages
	want := "[The person sent a file, saved in this chat's workspace as minutes.txt (text/plain, 9 bytes). The files tool reads it.]\nplease summarize"
	if got := last[len(last)-1].Content; got != want {
		t.Fatalf("the model read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir("slack:"+slacktest.TeamID+":D1"), "minutes.txt")); err != nil || string(b) != "we agreed" {
		t.Fatalf("the workspace holds %q (%v)", b, err)
	}

	// A shared picture is named for a model that reads images.
	h.env.Model.Text("A chart.")
	h.event(t, "Ev3", h.fake.DMWithFile("D1", owner, "", "100.3", slacktest.File{Name: "chart.png", MIME: "image/png", Content: []byte("png")}))
	h.fake.WaitCalls(t, "chat.postMessage", 2)
	var images string
	h.env.Store.Gorm().Raw("SELECT images FROM inbox_items WHERE event_id = 'event:Ev3'").Row().Scan(&images)
	if images != `["chart.png"]` {
		t.Errorf("the event's pictures are %q", images)
	}

	// A download link elsewhere gets no token, and the model is told.
	var sawToken bool
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken = r.Header.Get("Authorization") != ""
	}))
	defer evil.Close()
	e := slacktest.DM("D1", owner, "and this", "100.2")
	e["subtype"] = "file_share"
	e["files"] = []map[string]any{{"id": "F9", "name": "x.txt", "mimetype": "text/plain", "size": 3, "url_private_download": evil.URL + "/x.txt"}}
	h.env.Model.Text("ok")
	h.event(t, "Ev2", e)
	h.fake.WaitCalls(t, "chat.postMessage", 3)
	last = h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "x.txt, but it could not be kept") || sawToken {
		t.Fatalf("the model read %q; token sent elsewhere: %v", got, sawToken)
	}
}

// A workspace file is shared in the conversation with Slack's upload
// flow, in the thread when the chat is one.
func TestSendFileUploads(t *testing.T) {
	h := start(t, options{})
	chattest.Eventually(t, "the adapter to know its workspace", h.adapter.identified)
	path := filepath.Join(t.TempDir(), "report.csv")
	os.WriteFile(path, []byte("a,b\n1,2\n"), 0o600)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hub bridge.Hub
	hub.Add(h.adapter, nil)
	if err := hub.SendFile(context.Background(), "slack:"+slacktest.TeamID+":C1:171.5", "report.csv", f); err != nil {
		t.Fatal(err)
	}
	up := h.fake.Uploads()
	if len(up) != 1 || up[0].Channel != "C1" || up[0].Thread != "171.5" || up[0].Title != "report.csv" || string(up[0].Content) != "a,b\n1,2\n" {
		t.Fatalf("uploads %+v", up)
	}
	if err := hub.SendFile(context.Background(), "telegram:1", "x", f); err == nil {
		t.Error("a Telegram chat key was accepted")
	}
}

// An event Slack delivers again is dropped by the inbox without its file
// being downloaded and saved a second time.
func TestRetriedFileEventIsNotKeptTwice(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, options{files: ws})
	h.env.Model.Text("Got it.")
	e := h.fake.DMWithFile("D1", owner, "keep this", "100.1", slacktest.File{Name: "a.txt", MIME: "text/plain", Content: []byte("a")})
	h.event(t, "Ev1", e)
	h.fake.WaitCalls(t, "chat.postMessage", 1)
	h.event(t, "Ev1", e) // Slack's retry of the same event
	h.env.Model.Text("second")
	h.event(t, "Ev2", slacktest.DM("D1", owner, "next", "100.2"))
	h.fake.WaitCalls(t, "chat.postMessage", 2)
	entries, _ := os.ReadDir(ws.Dir("slack:" + slacktest.TeamID + ":D1"))
	if len(entries) != 1 {
		t.Fatalf("the workspace holds %d files", len(entries))
	}
}
