package ui_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"loadout/chat"
	"loadout/chat/chattest"
)

// screenshots, when set, is where the browser test writes a PNG of each
// page (docs/web.md shows them): go test -tags sqlite_fts5 ./ui -run
// TestBrowser -ui.screenshots ../docs/web
var screenshots = flag.String("ui.screenshots", "", "write PNG screenshots of the console's pages to this directory")

// browser starts Debian's chromium, headless; the test is skipped only
// when no chromium is installed (CI installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no chromium on this machine: apt-get install chromium (CI installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs actions with a time limit.
func step(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// visit opens a page, checks its main text and keeps a screenshot.
func visit(t *testing.T, ctx context.Context, url, shot string, want ...string) string {
	t.Helper()
	step(t, ctx, "open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main")))
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", url, w, text)
		}
	}
	if shot != "" && *screenshots != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(*screenshots, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, shot+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return text
}

// The console in a real browser: the operator signs in with the token
// and every page shows the store's data; model markup stays text; a
// person signed in by link sees their own page, is refused another's,
// and approves the held call from the page, which runs once.
func TestBrowser(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)

	// Anonymous: sent to the sign-in form.
	visit(t, ctx, s.URL+"/chats", "login", "Sign in", "Operator token")
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/login") {
		t.Fatalf("an anonymous visit ended at %s", loc)
	}
	step(t, ctx, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("header nav")))
	code := chat.CodeOf(s.Approval.ID)
	visit(t, ctx, s.URL+"/", "overview", "Overview", "test-model", "console: connected", s.Event.Ref(), "Messages per hour")
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('svg polyline').length")); err != nil || n == 0 {
		t.Errorf("no chart line drawn: %d %v", n, err)
	}
	visit(t, ctx, s.URL+"/chats", "chats", "console:local")
	text := visit(t, ctx, s.URL+"/conversation?key=console:local", "conversation", "show me some markup", "purge_archive", code)
	if !strings.Contains(text, `<script>document.title="pwned"</script>`) {
		t.Errorf("the model's markup is not shown as text:\n%s", text)
	}
	if title, _ := chromedp.Run(ctx, chromedp.Title()); title == "pwned" {
		t.Fatal("the model's script ran")
	}
	visit(t, ctx, s.URL+"/approvals", "approvals", code, "only console:local can answer")
	visit(t, ctx, s.URL+"/people", "people", "console:local")
	visit(t, ctx, s.URL+"/person?key=telegram:99", "person", "secret plans of other", "other's private memory")
	visit(t, ctx, s.URL+"/tools?q=schedule+a+reminder", "tools", "- scheduled_tasks (scheduled_tasks)", "load_tool_group")
	visit(t, ctx, s.URL+"/config", "config", "llm.model", "ui.admin_token")

	// A person, in a browser of their own, by the link /web sent.
	pctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	// The first call makes the tab, and must have no time limit: the
	// tab would end with it.
	if err := chromedp.Do(pctx); err != nil {
		t.Fatal(err)
	}
	link := s.link(t)
	visit(t, pctx, link, "", "This link works once")
	step(t, pctx, "use the link", chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS("header nav")))
	mine := visit(t, pctx, s.URL+"/", "my-page", "My page", "water the plants", "likes green tea", code)
	if strings.Contains(mine, "secret plans") || strings.Contains(mine, s.Event.Ref()) {
		t.Errorf("the person's page shows another's things:\n%s", mine)
	}
	visit(t, pctx, s.URL+"/person?key=telegram:99", "", "not yours")
	visit(t, pctx, s.URL+"/conversation?key=telegram:99", "", "There is nothing here.")
	visit(t, pctx, s.URL+"/tools", "", "not yours")
	visit(t, pctx, s.URL+"/approvals", "", code)
	step(t, pctx, "approve", chromedp.Click(chromedp.CSS(`button[value="approve"]`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	chattest.Eventually(t, "the approved call runs and the chat hears the answer", func() bool {
		return s.Runs.Load() == 1 && strings.Contains(s.Out.String(), "The archive is gone.")
	})
	visit(t, pctx, s.URL+"/approvals", "", "Nothing waits for an answer.", "done")
	if s.Runs.Load() != 1 {
		t.Fatalf("the call ran %d times", s.Runs.Load())
	}
}
