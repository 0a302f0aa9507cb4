package telegram

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools/files"
)

// A document or photo a person sends is saved in the chat's workspace,
// and the turn's message tells the model its name, type and size, with
// the caption as the text.
func TestFilesPeopleSendAreKept(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h.start(h.env, h.config(func(c *Config) { c.Files = ws }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "what does it say?",
		Document: &telegramtest.File{Name: "report.pdf", MIME: "application/pdf", Content: []byte("%PDF-1.4 twelve")}})
	h.tg.WaitSent(t, 1)
	last := h.env.Model.Last(t).Messages
	want := "[The person sent a file, saved in this chat's workspace as report.pdf (application/pdf, 15 bytes). The files tool reads it.]\nwhat does it say?"
	if got := last[len(last)-1].Content; got != want {
		t.Fatalf("the model read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir("telegram:42"), "report.pdf")); err != nil || string(b) != "%PDF-1.4 twelve" {
		t.Fatalf("the workspace holds %q (%v)", b, err)
	}
	h.tg.Push(telegramtest.Message{From: ana, Photo: &telegramtest.File{Content: []byte("\xff\xd8 a jpeg")}})
	h.tg.WaitSent(t, 2)
	last = h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "as photo-ufile-1001.jpg (image/jpeg, 9 bytes)") {
		t.Fatalf("a photo: the model read %q", got)
	}
	// The picture is named for a model that reads images.
	var images string
	h.env.Store.Gorm().Raw("SELECT images FROM inbox_items ORDER BY seq DESC LIMIT 1").Row().Scan(&images)
	if images != `["photo-ufile-1001.jpg"]` {
		t.Errorf("the event's pictures are %q", images)
	}
}

// A file whose body is larger than the most a bot may download, though
// its update stated less, is refused whole: never kept cut short as if
// it were the file.
func TestAFileLargerThanStatedIsNotKeptCut(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir(), MaxFileBytes: 64 << 20, MaxWorkspaceBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h.start(h.env, h.config(func(c *Config) { c.Files = ws }))
	h.tg.Push(telegramtest.Message{From: ana, Text: "the data",
		Document: &telegramtest.File{Name: "big.csv", MIME: "text/csv", Content: make([]byte, maxDownload+10), Stated: 1000}})
	h.tg.WaitSent(t, 1)
	last := h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "big.csv, but it could not be kept") {
		t.Errorf("the model read %q", got)
	}
	if entries, _ := os.ReadDir(ws.Dir("telegram:42")); len(entries) != 0 {
		t.Errorf("the workspace keeps %v", entries)
	}
}

func TestFilesNotKeptWithoutAWorkspace(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.start(h.env, h.config(nil))
	h.tg.Push(telegramtest.Message{From: ana, Document: &telegramtest.File{Name: "a.txt", Content: []byte("x")}})
	h.tg.WaitSent(t, 1)
	last := h.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "a.txt, but it could not be kept: files are not kept") {
		t.Fatalf("the model read %q", got)
	}
	if n := len(h.tg.Calls("getFile")); n != 0 {
		t.Errorf("%d downloads though nothing keeps files", n)
	}
}

// A workspace file goes out as a document, or as a photo when it is one.
func TestSendFile(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	a, _ := h.start(h.env, h.config(nil))
	h.tg.WaitFor(t, "connected", a.Ready)
	dir := t.TempDir()
	doc, img := filepath.Join(dir, "notes.txt"), filepath.Join(dir, "chart.png")
	os.WriteFile(doc, []byte("the notes"), 0o600)
	os.WriteFile(img, []byte("\x89PNG chart"), 0o600)
	docFile, imgFile := open(t, doc), open(t, img)
	ctx := context.Background()
	var hub bridge.Hub
	hub.Add(a, nil)
	if err := hub.SendFile(ctx, "telegram:42", "notes.txt", docFile); err != nil {
		t.Fatal(err)
	}
	if err := hub.SendFile(ctx, "telegram:-100:7", "chart.png", imgFile); err != nil {
		t.Fatal(err)
	}
	up := h.tg.Uploads()
	if len(up) != 2 || up[0].Method != "sendDocument" || up[0].ChatID != "42" || up[0].Name != "notes.txt" || string(up[0].Content) != "the notes" {
		t.Fatalf("uploads %+v", up)
	}
	if up[1].Method != "sendPhoto" || up[1].ChatID != "-100" || up[1].ThreadID != "7" {
		t.Errorf("the photo went as %+v", up[1])
	}
	if err := hub.SendFile(ctx, "slack:T1:C1", "x", docFile); err == nil {
		t.Error("a Slack chat key was accepted")
	}
}

// An update redelivered after the offset was lost is dropped by the inbox
// without its file being downloaded and saved a second time.
func TestRedeliveredFileIsNotKeptTwice(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.config(func(c *Config) { c.Files = ws })
	_, stop := h.start(h.env, cfg)
	msg := telegramtest.Message{From: ana, Document: &telegramtest.File{Name: "report.pdf", MIME: "application/pdf", Content: []byte("%PDF")}}
	id := h.tg.Push(msg)
	h.tg.WaitSent(t, 1)
	chattest.Eventually(t, "the item done", func() bool { return itemState(h.env, id) == "done" })
	stop()
	// Our offset is lost, and Telegram still has the update queued.
	h.env.Store.Gorm().Exec("DELETE FROM states WHERE key = ?", offsetKey)
	h.tg.Requeue(id, msg)
	h.start(h.env, cfg)
	h.tg.WaitFor(t, "the update redelivered and confirmed", func() bool { return h.tg.Confirmed(id) })
	last := h.tg.Push(telegramtest.Message{From: ana, Text: "after"})
	h.tg.WaitFor(t, "the next update confirmed", func() bool { return h.tg.Confirmed(last) })
	h.tg.WaitSent(t, 2)
	entries, _ := os.ReadDir(ws.Dir("telegram:42"))
	if len(entries) != 1 || len(h.tg.Calls("getFile")) != 1 {
		t.Fatalf("the workspace holds %d files after %d downloads", len(entries), len(h.tg.Calls("getFile")))
	}
}

// open opens a file for the test's length.
func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
