package webui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/webui"
	"loadout/bridge/webui/webuitest"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/httpd"
	"loadout/store/storetest"
	"loadout/tools"
	"loadout/tools/files"
	"loadout/voice"
	"loadout/voice/voicetest"
)

// fixture is one process with the browser chat and people signed in.
type fixture struct {
	env  *storetest.Env
	ws   *files.Workspaces
	auth *webuitest.Auth
	srv  *server
}

func newFixture(t *testing.T, o storetest.Options, cfg webui.Config, d bridge.Delivery) *fixture {
	t.Helper()
	env := storetest.NewEnv(t, o)
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if d.Files == nil {
		d.Files = ws
	}
	d.ShutdownGrace = time.Nanosecond
	auth := webuitest.NewAuth()
	srv := startServer(t, auth, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store, Delivery: d}, cfg)
	return &fixture{env: env, ws: ws, auth: auth, srv: srv}
}

func (f *fixture) person(t *testing.T, user string) *webuitest.Person {
	p := webuitest.NewPerson(f.auth, user)
	t.Cleanup(p.Close)
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	chattest.Eventually(t, what, cond)
}

func hasAnswers(p *webuitest.Person, want ...string) func() bool {
	return func() bool { return slices.Equal(p.Answers(), want) }
}

// Without the web side (ui.enabled false) there is nobody to sign in:
// the channel refuses to build, naming both keys.
func TestTheChannelNeedsTheWebSide(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	_, err := webui.Kind().Build(context.Background(), webui.Config{Enabled: true},
		bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store, Mux: http.NewServeMux()})
	if err == nil || !strings.Contains(err.Error(), "webui.enabled") || !strings.Contains(err.Error(), "ui.enabled") {
		t.Fatalf("err %v", err)
	}
}

// Nothing of the chat answers a request without a session, or with a
// cookie of no session: the page sends to /login, the rest is 401.
func TestAnAnonymousRequestIsRefused(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, cookie := range []string{"", "forged"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/chat"}, {"GET", "/chat/static/chat.js"}, {"GET", "/chat/stream"}, {"GET", "/chat/file?name=x"},
			{"POST", "/chat/send"}, {"POST", "/chat/answer"},
		} {
			req, _ := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader("id=abcdefgh12&text=hi"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if cookie != "" {
				req.AddCookie(&http.Cookie{Name: webuitest.Cookie, Value: cookie})
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusUnauthorized
			if c.path == "/chat" {
				want = http.StatusSeeOther
			}
			if resp.StatusCode != want || (want != http.StatusSeeOther && strings.Contains(string(b), "<")) {
				t.Errorf("%s %s (cookie %q): %d %q", c.method, c.path, cookie, resp.StatusCode, b)
			}
			if want == http.StatusSeeOther && resp.Header.Get("Location") != "/login" {
				t.Errorf("%s sends to %q", c.path, resp.Header.Get("Location"))
			}
		}
	}
	if n := len(f.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns", n)
	}
}

// A send or a press without the session's CSRF token (a form another
// site posts with the person's cookie) is refused and changes nothing.
func TestASendWithoutTheSessionsCSRFTokenIsRefused(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ana := f.person(t, "telegram:42")
	other := f.person(t, "telegram:43")
	for _, token := range []string{"", "wrong", other.CSRF} {
		for _, path := range []string{"/chat/send", "/chat/answer"} {
			form := url.Values{"id": {"abcdefgh12"}, "text": {"transfer everything"}, "approval": {"x"}, "choice": {"approve"}, "csrf": {token}}
			req := ana.Request(http.MethodPost, f.srv.URL, path, strings.NewReader(form.Encode()))
			req.Header.Del("X-CSRF-Token")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s with token %q: %d", path, token, resp.StatusCode)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(f.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns", n)
	}
	var items int
	f.env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items").Scan(&items)
	if items != 0 {
		t.Fatalf("%d inbox items", items)
	}
	// The form field carries the token as well as the header does.
	f.env.Model.Text("Done.")
	form := url.Values{"id": {"abcdefgh13"}, "text": {"hello"}, "csrf": {ana.CSRF}}
	req := ana.Request(http.MethodPost, f.srv.URL, "/chat/send", strings.NewReader(form.Encode()))
	req.Header.Del("X-CSRF-Token")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
}

// purge registers a destructive tool that counts its runs.
func purge(runs *atomic.Int32) func(*tools.Registry) error {
	return func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive for good.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}
}

// A person reaches their own chat only: another signed-in person
// cannot press their question's buttons, download their files or read
// their stream, whatever the request names. The turn runs as the
// person's own user key.
func TestAnotherPersonsChatIsRefused(t *testing.T) {
	var runs atomic.Int32
	f := newFixture(t, storetest.Options{Register: purge(&runs)}, webui.Config{}, bridge.Delivery{})
	ana, ben := f.person(t, "telegram:42"), f.person(t, "slack:T1:U2")
	ana.Connect(t, f.srv.URL)
	ben.Connect(t, f.srv.URL)
	f.env.Model.Call("purge_archive", `{}`)
	f.env.Model.Text("The archive is gone.")
	ana.Send(t, f.srv.URL, "purge the archive", map[string][]byte{"secret.txt": []byte("ana's secret")})
	var ask webuitest.Event
	waitFor(t, "Ana's question", func() bool { var ok bool; ask, ok = ana.LastAsk(); return ok })

	if status, msg, _ := ben.Press(f.srv.URL, ask.Approval, "approve"); status != http.StatusConflict {
		t.Fatalf("Ben's press: %d %q", status, msg)
	}
	if status, _, _, _ := ben.Download(f.srv.URL, "secret.txt"); status != http.StatusNotFound {
		t.Fatalf("Ben downloaded Ana's file: %d", status)
	}
	if status, _, _, _ := ben.Download(f.srv.URL, "../"+filepath.Base(f.ws.Dir(webui.ChatKey("telegram:42")))+"/secret.txt"); status != http.StatusNotFound {
		t.Fatalf("Ben reached Ana's file by a path: %d", status)
	}
	time.Sleep(100 * time.Millisecond)
	if runs.Load() != 0 || slices.ContainsFunc(ben.Events(), func(e webuitest.Event) bool { return e.Kind != "working" || e.On }) {
		t.Fatalf("runs %d; Ben's page shows %+v", runs.Load(), ben.Events())
	}
	if status, b, _, _ := ana.Download(f.srv.URL, "secret.txt"); status != http.StatusOK || string(b) != "ana's secret" {
		t.Fatalf("Ana's own file: %d %q", status, b)
	}
	if status, msg, _ := ana.Press(f.srv.URL, ask.Approval, "approve"); status != http.StatusAccepted {
		t.Fatalf("Ana's press: %d %q", status, msg)
	}
	waitFor(t, "the answer after approval", func() bool { return slices.Contains(ana.Answers(), "The archive is gone.") })
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
	// A second press of the answered question is refused, and its
	// buttons go.
	if status, _, _ := ana.Press(f.srv.URL, ask.Approval, "approve"); status != http.StatusConflict {
		t.Fatalf("a second press: %d", status)
	}
	if runs.Load() != 1 {
		t.Fatalf("runs %d after a second press", runs.Load())
	}
	first := f.env.Model.Requests()[0]
	var user string
	f.env.Store.Gorm().Raw("SELECT user_key FROM approvals LIMIT 1").Scan(&user)
	if user != "telegram:42" || len(first.Messages) == 0 {
		t.Fatalf("the approval is %q's", user)
	}
}

// A stream that drops and reconnects with Last-Event-ID gets what was
// kept meanwhile, each part once; a new page gets the chat's history.
func TestAStreamResumesWithoutLosingOrDoublingParts(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	f.env.Model.Text("First.")
	f.env.Model.Text("Second.")
	f.env.Model.Text("Third.")
	ana.Send(t, f.srv.URL, "one", nil)
	waitFor(t, "the first answer", hasAnswers(ana, "First."))
	ana.Close()
	ana.Send(t, f.srv.URL, "two", nil)
	ana.Send(t, f.srv.URL, "three", nil)
	waitFor(t, "both turns", func() bool { return len(f.env.Model.Requests()) == 3 })
	time.Sleep(200 * time.Millisecond)
	ana.Connect(t, f.srv.URL)
	waitFor(t, "the answers sent while away", hasAnswers(ana, "First.", "Second.", "Third."))
	time.Sleep(200 * time.Millisecond)
	if got := ana.Answers(); !slices.Equal(got, []string{"First.", "Second.", "Third."}) {
		t.Fatalf("answers %q", got)
	}
	seen := map[int64]bool{}
	var working []bool
	for _, e := range ana.Events() {
		if e.ID != 0 && seen[e.ID] {
			t.Fatalf("event %d shown twice", e.ID)
		}
		seen[e.ID] = true
		if e.Kind == "working" {
			working = append(working, e.On)
		}
	}
	// "Writing…" came with the turns and went, though the page was away
	// when the last ended: a stream starts with the sign as it is now.
	if !slices.Contains(working, true) || working[len(working)-1] {
		t.Fatalf("the working sign went %v", working)
	}
	// A page opened now shows the whole chat, its own messages too.
	tab := webuitest.NewPerson(f.auth, "telegram:42")
	tab.Cookie, tab.CSRF = ana.Cookie, ana.CSRF
	t.Cleanup(tab.Close)
	tab.Connect(t, f.srv.URL)
	waitFor(t, "the history", hasAnswers(tab, "First.", "Second.", "Third."))
	var yours []string
	for _, e := range tab.Events() {
		if e.Kind == "you" {
			yours = append(yours, e.Text)
		}
	}
	if !slices.Equal(yours, []string{"one", "two", "three"}) {
		t.Fatalf("the person's messages: %q", yours)
	}
}

// The server cuts a response that takes longer than its write timeout
// (30 s by default): a stream sets its own deadline as it goes, so it
// stays open past it and still delivers.
func TestAStreamOutlivesTheServersWriteTimeout(t *testing.T) {
	env := storetest.NewEnv(t, storetest.Options{})
	ws, _ := files.New(files.Config{Dir: t.TempDir()})
	auth := webuitest.NewAuth()
	mux := http.NewServeMux()
	ch, err := webui.Kind().Build(context.Background(), webui.Config{Enabled: true, KeepAlive: 200 * time.Millisecond},
		bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store, Mux: mux, Web: auth,
			Delivery: bridge.Delivery{Files: ws, ShutdownGrace: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	ch.(bridge.Mounter).Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	limits := httpd.DefaultLimits
	limits.Write = 500 * time.Millisecond
	srv.Config = httpd.Server(mux, limits, slog.New(slog.DiscardHandler))
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ch.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "ready", ch.(bridge.Readier).Ready)
	ana := webuitest.NewPerson(auth, "telegram:42")
	defer ana.Close()
	ana.Connect(t, srv.URL)
	time.Sleep(1500 * time.Millisecond)
	env.Model.Text("Still here.")
	ana.Send(t, srv.URL, "hello?", nil)
	waitFor(t, "the answer", hasAnswers(ana, "Still here."))
	if n := ana.Streams(); n != 1 {
		t.Fatalf("the stream was opened %d times", n)
	}
}

// Files larger than the server's 1 MB body cap are taken up to
// webui.max_upload_mb; past it the person is told the limit and
// nothing is stored.
func TestAnUploadIsHeldToMaxUploadMB(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{MaxUploadMB: 3}, bridge.Delivery{})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	f.env.Model.Text("Got the big one.")
	big := bytes.Repeat([]byte("a"), 2<<20)
	ana.Send(t, f.srv.URL, "here", map[string][]byte{"big.bin": big})
	waitFor(t, "the answer", hasAnswers(ana, "Got the big one."))
	if b, err := os.ReadFile(filepath.Join(f.ws.Dir(webui.ChatKey("telegram:42")), "big.bin")); err != nil || len(b) != len(big) {
		t.Fatalf("kept %d bytes (%v)", len(b), err)
	}
	huge := bytes.Repeat([]byte("b"), 4<<20)
	status, msg, err := ana.Post(f.srv.URL, "/chat/send", url.Values{"id": {"abcdefgh99"}, "text": {"and this"}},
		map[string]map[string][]byte{"file": {"huge.bin": huge}})
	if err != nil || status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "webui.max_upload_mb") {
		t.Fatalf("%d %q %v", status, msg, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(f.env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns", n)
	}
	if _, err := os.Stat(filepath.Join(f.ws.Dir(webui.ChatKey("telegram:42")), "huge.bin")); err == nil {
		t.Fatal("the refused file was kept")
	}
}

// A recording made in the browser goes the voice path: kept in the
// chat's files, transcribed once, answered from its transcript, and the
// answer spoken back plays on the page.
func TestAVoiceRecordingIsHeardAndAnsweredAloud(t *testing.T) {
	audio := voicetest.New(t, "what is on my calendar")
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc := voice.New(voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}.WithDefaults("", ""),
		voice.Options{Workspace: ws, Logger: slog.New(slog.DiscardHandler),
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{Files: ws, Voice: svc})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	f.env.Model.Text("Two meetings.")
	rec := voicetest.Note(t)
	status, msg, err := ana.Post(f.srv.URL, "/chat/send", url.Values{"id": {"voice000001"}},
		map[string]map[string][]byte{"voice": {"voice.webm": rec}})
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("%d %q %v", status, msg, err)
	}
	var spoken string
	waitFor(t, "the spoken answer", func() bool {
		for _, e := range ana.Events() {
			if e.Kind == "voice" {
				spoken = e.File
			}
		}
		return spoken != ""
	})
	if got := ana.Answers(); !slices.Equal(got, []string{"Two meetings."}) {
		t.Fatalf("answers %q", got)
	}
	tr := audio.Transcriptions()
	if len(tr) != 1 || tr[0].FileName != "voice.webm" || !bytes.Equal(tr[0].Audio, rec) {
		t.Fatalf("transcriptions %+v", len(tr))
	}
	last := f.env.Model.Requests()[0].Messages
	if text := last[len(last)-1].Content; !strings.HasPrefix(text, "(voice message) what is on my calendar") {
		t.Fatalf("the model read %q", text)
	}
	status, b, h, err := ana.Download(f.srv.URL, spoken+"")
	if err != nil || status != http.StatusOK || !bytes.Equal(b, audio.Audio()) {
		t.Fatalf("download: %d %v", status, err)
	}
	if h.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
		t.Fatalf("headers %v", h)
	}
	req := ana.Request(http.MethodGet, f.srv.URL, "/chat/file?play=1&name="+url.QueryEscape(spoken), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "audio/ogg" {
		t.Fatalf("played as %q", resp.Header.Get("Content-Type"))
	}
}

// The page is served with a strict Content-Security-Policy, carries no
// inline script, and shows the person's key escaped.
func TestThePageHasNoInlineScript(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ana := f.person(t, `telegram:<b>42</b>`)
	resp, err := http.DefaultClient.Do(ana.Request(http.MethodGet, f.srv.URL, "/chat", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("%d, CSP %q", resp.StatusCode, csp)
	}
	if strings.Contains(page, "<b>42") || !strings.Contains(page, "&lt;b&gt;42") || !strings.Contains(page, ana.CSRF) {
		t.Fatalf("page:\n%s", page)
	}
	if strings.Count(page, "<script") != strings.Count(page, `<script src="/chat/static/chat.js" defer></script>`) {
		t.Fatalf("an inline script:\n%s", page)
	}
}

// A message is shown on the page before it is stored, so it always
// comes before its answer; one the inbox does not take (the process is
// stopping) is taken back from the page, and the person is told to send
// it again.
func TestAMessageNotStoredIsTakenBackFromThePage(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	f.env.Model.Text("Hello.")
	ana.Send(t, f.srv.URL, "hi", nil)
	waitFor(t, "the answer", hasAnswers(ana, "Hello."))
	var shown []string
	for _, e := range ana.Events() {
		if e.Kind != "working" {
			shown = append(shown, e.Kind)
		}
	}
	if len(shown) < 2 || shown[0] != "you" {
		t.Fatalf("the page showed %q", shown)
	}
	// Stopped, the channel takes no message; the server still answers.
	f.srv.Chat.Pipeline().Stop()
	status, msg, err := ana.Post(f.srv.URL, "/chat/send", url.Values{"id": {"abcdefgh-late"}, "text": {"too late"}}, nil)
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(msg, "send it again") {
		t.Fatalf("%d %q %v", status, msg, err)
	}
	raw, err := f.env.Store.State(context.Background(), "webui:history:"+webui.ChatKey("telegram:42"))
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []webuitest.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		t.Fatal(err)
	}
	n := len(h.Events)
	if n < 2 || h.Events[n-2].Kind != "you" || h.Events[n-2].Text != "too late" || h.Events[n-1].Kind != "unsent" ||
		h.Events[n-1].Ref != strconv.FormatInt(h.Events[n-2].ID, 10) {
		t.Fatalf("history %+v", h.Events)
	}
}

// A recording over voice.max_bytes is answered with the limit, never
// kept or sent to the transcription service; without voice set up, the
// person is told voice is off.
func TestAVoiceRecordingOverTheLimitIsRefused(t *testing.T) {
	audio := voicetest.New(t, "never heard")
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key}.WithDefaults("", "")
	cfg.MaxBytes = 1000
	svc := voice.New(cfg, voice.Options{Workspace: ws, Logger: slog.New(slog.DiscardHandler)})
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{Files: ws, Voice: svc})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	status, _, err := ana.Post(f.srv.URL, "/chat/send", url.Values{"id": {"voice-too-long"}},
		map[string]map[string][]byte{"voice": {"voice.webm": voicetest.Note(t)}})
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("%d %v", status, err)
	}
	waitFor(t, "the refusal", func() bool {
		a := ana.Answers()
		return len(a) == 1 && strings.Contains(a[0], "I take notes up to")
	})
	if n := len(audio.Transcriptions()); n != 0 || len(f.env.Model.Requests()) != 0 {
		t.Fatalf("%d transcriptions, %d turns", n, len(f.env.Model.Requests()))
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(webui.ChatKey("telegram:42")), "voice.webm")); err == nil {
		t.Fatal("the refused recording was kept")
	}

	off := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ben := off.person(t, "telegram:43")
	ben.Connect(t, off.srv.URL)
	if status, _, err := ben.Post(off.srv.URL, "/chat/send", url.Values{"id": {"voice-no-voice"}},
		map[string]map[string][]byte{"voice": {"voice.webm": []byte("webm")}}); err != nil || status != http.StatusAccepted {
		t.Fatalf("%d %v", status, err)
	}
	waitFor(t, "voice is off", hasAnswers(ben, bridge.TextVoiceOff))
}

// A file of the chat's own files (files send) is offered as it is; one
// from elsewhere is copied into the chat's files first, so a download
// only ever reads the chat's files.
func TestAFileSentIsOfferedFromTheChatsFiles(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	key := webui.ChatKey("telegram:42")
	if _, _, err := f.ws.Save(context.Background(), key, "report.csv", strings.NewReader("mine")); err != nil {
		t.Fatal(err)
	}
	own, err := f.ws.Open(key, "report.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	var hub bridge.Hub
	hub.Add(f.srv.Chat, nil)
	if err := hub.SendFile(context.Background(), key, "report.csv", own); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "report.csv")
	os.WriteFile(other, []byte("elsewhere"), 0o600)
	of, _ := os.Open(other)
	defer of.Close()
	if err := hub.SendFile(context.Background(), key, "report.csv", of); err != nil {
		t.Fatal(err)
	}
	var offered []string
	waitFor(t, "both files offered", func() bool {
		offered = nil
		for _, e := range ana.Events() {
			if e.Kind == "file" {
				offered = append(offered, e.File)
			}
		}
		return len(offered) == 2
	})
	if !slices.Equal(offered, []string{"report.csv", "report-2.csv"}) {
		t.Fatalf("offered %q", offered)
	}
	for name, want := range map[string]string{"report.csv": "mine", "report-2.csv": "elsewhere"} {
		if status, b, _, _ := ana.Download(f.srv.URL, name); status != http.StatusOK || string(b) != want {
			t.Fatalf("%s: %d %q", name, status, b)
		}
	}
}

// A picture attached goes to a model that reads images with its message
// (llm.vision), read from the chat's files, as on Telegram.
func TestAPictureAttachedIsSeenByTheModel(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	images := func(_ context.Context, chatKey, name string) (chat.Image, error) {
		mime, data, err := ws.Image(chatKey, name, 5<<20)
		return chat.Image{MIME: mime, Data: data}, err
	}
	f := newFixture(t, storetest.Options{Config: chat.Config{Images: images}}, webui.Config{}, bridge.Delivery{Files: ws})
	ana := f.person(t, "telegram:42")
	ana.Connect(t, f.srv.URL)
	f.env.Model.Text("A cat.")
	png := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 32))
	status, msg, err := ana.Post(f.srv.URL, "/chat/send", url.Values{"id": {"picture-0001"}, "text": {"what is this?"}},
		map[string]map[string][]byte{"file": {"cat.png": png}})
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("%d %q %v", status, msg, err)
	}
	waitFor(t, "the answer", hasAnswers(ana, "A cat."))
	msgs := f.env.Model.Last(t).Messages
	parts := msgs[len(msgs)-1].MultiContent
	if len(parts) != 2 || !strings.Contains(parts[0].Text, "what is this?") || parts[1].ImageURL == nil ||
		!strings.HasPrefix(parts[1].ImageURL.URL, "data:image/png;base64,") {
		t.Fatalf("the message went as %+v", msgs[len(msgs)-1])
	}
}
