package webui_test

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"loadout/bridge"
	"loadout/bridge/webui"
	"loadout/bridge/webui/webuitest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

// screenshots, when set, is where the browser test keeps its picture
// of the chat page (docs/web.md shows it):
//
//	go test -tags sqlite_fts5 ./bridge/webui -run Browser -args -screenshots ../../docs/web
var screenshots = flag.String("screenshots", "", "keep the chat page's screenshot in this directory")

// browser starts Debian's chromium, headless, with a fake microphone
// that needs no permission prompt; the test is skipped, saying how to
// get it, when chromium is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("chromium-browser"); err != nil {
			t.Skip("chromium is not installed (apt-get install -y chromium): the browser tests need it")
		}
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("use-fake-ui-for-media-stream", true), chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.WindowSize(1000, 800))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium did not start: %v", err)
	}
	return ctx
}

// signIn sets the person's session cookie in the browser.
func signIn(p *webuitest.Person, base string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{Name: webuitest.Cookie, Value: p.Cookie, URL: base, HTTPOnly: new(true)})
		return err
	})
}

// until waits for a JavaScript condition on the page.
func until(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(15*time.Second))
}

// answered waits for an answer on the page with exactly this text.
func answered(text string) chromedp.Action[chromedp.Void] {
	return until(`[...document.querySelectorAll(".msg.bot .text")].some(e => e.textContent === ` + strconv.Quote(text) + `)`)
}

// In a real browser: a person signed in opens /chat, types a message
// and sees the answer stream in (a draft, then the answer) with the
// model's markup shown as text, never run; presses Approve on a
// question and sees the held call run once; attaches a file that the
// model reads, downloads the file the answer offers, and records a
// voice message that goes through transcription.
func TestChatInTheBrowser(t *testing.T) {
	ctx := browser(t)
	var runs atomic.Int32
	audio := voicetest.New(t, "what is on my calendar")
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc := voice.New(voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key}.WithDefaults("", ""),
		voice.Options{Workspace: ws, Logger: slog.New(slog.DiscardHandler), Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	f := newFixture(t, storetest.Options{Register: purge(&runs)}, webui.Config{}, bridge.Delivery{Files: ws, Voice: svc})
	ana := f.person(t, "telegram:42")
	base := f.srv.URL

	const hostile = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
	f.env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "there, ", "here is markup: ", hostile, " — the end."}, ChunkDelay: 300 * time.Millisecond})
	err = chromedp.Do(ctx,
		signIn(ana, base),
		chromedp.Navigate(base+"/chat"),
		chromedp.WaitVisible(chromedp.ID("composer")),
		until(`document.getElementById("state").textContent === "Connected"`),
		chromedp.SendKeys(chromedp.ID("text"), "hi"),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.CSS(".msg.bot.draft")),
	)
	if err != nil {
		t.Fatal(err)
	}
	draft, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".msg.bot.draft")))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, until(`document.querySelector(".msg.bot:not(.draft)") && document.querySelector(".msg.bot:not(.draft)").textContent.endsWith("the end.")`)); err != nil {
		t.Fatal(err)
	}
	final, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".msg.bot:not(.draft)")))
	if err != nil {
		t.Fatal(err)
	}
	xss, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined || document.querySelectorAll("main script, main img").length > 0`))
	if err != nil {
		t.Fatal(err)
	}
	if draft == "" || strings.HasSuffix(draft, "the end.") {
		t.Errorf("the draft shown was %q", draft)
	}
	if want := "Hello there, here is markup: " + hostile + " — the end."; final != want || xss {
		t.Fatalf("the answer shows %q (markup ran: %v)", final, xss)
	}

	// A question: Approve runs the held call once.
	f.env.Model.Call("purge_archive", `{}`)
	f.env.Model.Text("The archive is gone.")
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("text"), "purge the archive"),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.CSS(".msg.ask button.approve")),
		chromedp.Click(chromedp.CSS(".msg.ask button.approve")),
		chromedp.WaitVisible(chromedp.CSS(".msg.ask .closed")),
		answered("The archive is gone."),
	)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".msg.ask .closed")))
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || closed != "You chose: Approve." {
		t.Fatalf("runs %d, the question says %q", runs.Load(), closed)
	}

	// A file attached is kept and read by the model; one offered is
	// downloaded.
	notes := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notes, []byte("the notes"), 0o600)
	f.env.Model.Text("Read it.")
	err = chromedp.Do(ctx,
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{notes}),
		chromedp.SendKeys(chromedp.ID("text"), "what does it say?"),
		chromedp.Click(chromedp.ID("send")),
		answered("Read it."),
	)
	if err != nil {
		t.Fatal(err)
	}
	last := f.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.Contains(got, "saved in this chat's workspace as notes.txt") || !strings.Contains(got, "what does it say?") {
		t.Fatalf("the model read %q", got)
	}
	report := filepath.Join(t.TempDir(), "report.csv")
	os.WriteFile(report, []byte("a,b\n1,2\n"), 0o600)
	rf, err := os.Open(report)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	var hub bridge.Hub
	hub.Add(f.srv.Chat, nil)
	if err := hub.SendFile(context.Background(), webui.ChatKey("telegram:42"), "report.csv", rf); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".msg.file a"))); err != nil {
		t.Fatal(err)
	}
	downloaded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector(".msg.file a").href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if downloaded != "a,b\n1,2\n" {
		t.Fatalf("downloaded %q", downloaded)
	}

	// A voice message recorded in the browser (its fake microphone).
	f.env.Model.Text("Two meetings.")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("record")),
		until(`document.getElementById("record").textContent === "Stop and send"`),
		chromedp.Sleep(1500*time.Millisecond),
		chromedp.Click(chromedp.ID("record")),
		answered("Two meetings."),
		chromedp.WaitVisible(chromedp.CSS(".msg.you audio")),
	)
	if err != nil {
		t.Fatal(err)
	}
	tr := audio.Transcriptions()
	// WebM begins with the EBML magic number.
	if len(tr) != 1 || tr[0].FileName != "voice.webm" || !bytes.HasPrefix(tr[0].Audio, []byte{0x1A, 0x45, 0xDF, 0xA3}) {
		t.Fatalf("transcriptions: %d", len(tr))
	}
	last = f.env.Model.Last(t).Messages
	if got := last[len(last)-1].Content; !strings.HasPrefix(got, "(voice message) what is on my calendar") {
		t.Fatalf("the model read %q", got)
	}
	if *screenshots != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, "chat.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The page outlives a restart of the server: its stream reconnects to
// the next process with Last-Event-ID and shows what came meanwhile,
// each part once.
func TestThePageResumesAcrossARestart(t *testing.T) {
	ctx := browser(t)
	env := storetest.NewEnv(t, storetest.Options{})
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	auth := webuitest.NewAuth()
	ana := webuitest.NewPerson(auth, "telegram:42")
	d := bridge.Delivery{Files: ws, ShutdownGrace: time.Nanosecond}
	first := startServer(t, auth, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store, Delivery: d}, webui.Config{})
	base := first.URL
	env.Model.Text("First.")
	err = chromedp.Do(ctx,
		signIn(ana, base),
		chromedp.Navigate(base+"/chat"),
		until(`document.getElementById("state").textContent === "Connected"`),
		chromedp.SendKeys(chromedp.ID("text"), "one"),
		chromedp.Click(chromedp.ID("send")),
		answered("First."),
	)
	if err != nil {
		t.Fatal(err)
	}
	first.stop()
	// While the server is down, the page says so.
	if err := chromedp.Do(ctx, until(`document.getElementById("state").textContent === "Reconnecting…"`)); err != nil {
		t.Fatal(err)
	}
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: env.DBPath, Model: env.Model})
	second := startServerAt(t, strings.TrimPrefix(base, "http://"), auth,
		bridge.Env{Router: bridge.NewRouter(env2.Engine, "loadout"), Store: env2.Store, Delivery: d}, webui.Config{})
	// An answer that reaches the chat while the page reconnects.
	var hub bridge.Hub
	hub.Add(second.Chat, nil)
	if err := hub.Notify(context.Background(), webui.ChatKey("telegram:42"), "A notice while you were away."); err != nil {
		t.Fatal(err)
	}
	env.Model.Text("Second.")
	err = chromedp.Do(ctx,
		until(`document.getElementById("state").textContent === "Connected"`),
		answered("A notice while you were away."),
		chromedp.SendKeys(chromedp.ID("text"), "two"),
		chromedp.Click(chromedp.ID("send")),
		answered("Second."),
		chromedp.Sleep(300*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".msg")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", "First.", "A notice while you were away.", "two", "Second."}; !slices.Equal(shown, want) {
		t.Fatalf("the page shows %q, want %q", shown, want)
	}
}
