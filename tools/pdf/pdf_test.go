package pdf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"loadout/tools"
	"loadout/tools/files"
	"loadout/tools/files/filestest"
	"loadout/tools/pdf/pdftest"
)

// document is pdftest.Document.
var document = pdftest.Document

func setup(t *testing.T, fetch func(ctx context.Context, url string) ([]byte, error)) (*files.Workspaces, func(name, args string) tools.Result) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	if err := r.AddGroup(Group(), Tools(Config{Workspaces: ws, Fetch: fetch, MaxChars: 40})...); err != nil {
		t.Fatal(err)
	}
	x := tools.NewExecutor(r, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local"})
	return ws, func(name, args string) tools.Result {
		return x.Run(ctx, nil, []tools.Call{{ID: "1", Name: name, Arguments: args}})[0]
	}
}

func TestPDFTools(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(document("", "From the web")) }))
	defer srv.Close()
	fetch := func(ctx context.Context, url string) ([]byte, error) {
		resp, err := http.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return b.Bytes(), nil
	}
	ws, call := setup(t, fetch)
	ctx := context.Background()
	ws.Save(ctx, "console:local", "report.pdf", bytes.NewReader(document("", "First page words", "Second page words", "Third page")))
	ws.Save(ctx, "console:local", "locked.pdf", bytes.NewReader(document("/Encrypt 99 0 R ", "secret")))
	ws.Save(ctx, "console:local", "broken.pdf", strings.NewReader("%PDF-1.4 this is not really a PDF"))
	ws.Save(ctx, "console:local", "notes.txt", strings.NewReader("plain"))

	var info infoOut
	json.Unmarshal([]byte(call("pdf_info", `{"path":"report.pdf"}`).Content), &info)
	if info.Pages != 3 || info.Title != "Quarterly report" || info.Author != "Ana" || info.Encrypted {
		t.Errorf("info %+v", info)
	}
	var text textOut
	json.Unmarshal([]byte(call("pdf_text", `{"path":"report.pdf","first_page":2,"last_page":3}`).Content), &text)
	if !strings.Contains(text.Text, "Second page words") || strings.Contains(text.Text, "First") || text.Pages != "2-3 of 3" || text.NextOffset != 40 {
		t.Errorf("text %+v", text)
	}
	json.Unmarshal([]byte(call("pdf_text", fmt.Sprintf(`{"url":%q}`, srv.URL+"/web.pdf")).Content), &text)
	if !strings.Contains(text.Text, "From the web") {
		t.Errorf("a URL's text %+v", text)
	}
	var locked infoOut
	json.Unmarshal([]byte(call("pdf_info", `{"path":"locked.pdf"}`).Content), &locked)
	if !locked.Encrypted {
		t.Errorf("an encrypted PDF: %+v", locked)
	}
	for args, code := range map[string]string{
		`{"path":"broken.pdf"}`:  tools.CodeInvalidArgument,
		`{"path":"notes.txt"}`:   tools.CodeInvalidArgument,
		`{"path":"missing.pdf"}`: tools.CodeNotFound,
		`{}`:                     tools.CodeMissingParameter,
		`{"path":"report.pdf","url":"http://x/"}`: tools.CodeInvalidArgument,
		`{"path":"report.pdf","first_page":5}`:    tools.CodeInvalidArgument,
		`{"path":"../../etc/passwd"}`:             tools.CodeNotFound,
	} {
		if r := call("pdf_text", args); r.Code != code {
			t.Errorf("%s: %+v, want %s", args, r, code)
		}
	}
	if r := call("pdf_text", `{"path":"locked.pdf"}`); r.Code != tools.CodeInvalidArgument || !strings.Contains(r.Content, "encrypted") {
		t.Errorf("text of an encrypted PDF: %+v", r)
	}
}

// A page rendered with poppler's pdftoppm lands in the workspace as a
// PNG.
func TestRenderPage(t *testing.T) {
	if _, err := exec.LookPath("pdftoppm"); err != nil {
		t.Skip("pdftoppm (poppler-utils) is not installed; .ci/run installs it")
	}
	ws, call := setup(t, nil)
	ws.Save(context.Background(), "console:local", "report.pdf", bytes.NewReader(document("", "Page one", "Page two")))
	r := call("pdf_render", `{"path":"report.pdf","page":2,"dpi":50}`)
	var out renderOut
	json.Unmarshal([]byte(r.Content), &out)
	if out.Saved != "report-page-2.png" {
		t.Fatalf("render %+v", r)
	}
	p, _ := ws.Path("console:local", out.Saved)
	png, err := os.ReadFile(p)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the page is not a PNG: %v", err)
	}
	if r := call("pdf_render", `{"path":"report.pdf","page":9}`); r.Code != tools.CodeInvalidArgument {
		t.Errorf("a page past the end: %+v", r)
	}
}

func TestRenderWithoutPoppler(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g := &group{cfg: Config{Workspaces: ws}} // no renderer found
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "c"})
	_, err = g.render(ctx, renderIn{Page: 1})
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != "not_configured" || !strings.Contains(te.Suggestion, "poppler-utils") {
		t.Errorf("without a renderer: %v", err)
	}
}

func TestPDFFromDrive(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var asked string
	r := tools.NewRegistry()
	r.AddGroup(Group(), Tools(Config{Workspaces: ws, Drive: func(ctx context.Context, id string, max int64) (string, []byte, error) {
		asked = tools.CallerFrom(ctx).UserKey + "/" + id
		return "plan.pdf", document("", "From Drive"), nil
	}})...)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "c", UserKey: "telegram:1"})
	res := tools.NewExecutor(r, nil).Run(ctx, nil, []tools.Call{{ID: "1", Name: "pdf_text", Arguments: `{"drive_file_id":"f1"}`}})[0]
	if !strings.Contains(res.Content, "From Drive") || asked != "telegram:1/f1" {
		t.Errorf("from Drive: %+v (asked %q)", res, asked)
	}
}

// Found by probing: a 526-byte PDF whose content stream claims
// 1,000,000,000,000 columns made the PDF library allocate a terabyte:
// "fatal error: runtime: out of memory", which no recover catches, and
// the service was gone (and went again on every restart). The PDF is now
// read in a worker process under a memory limit: the worker dies, the
// call is a plain error, and the next PDF reads as usual.
func TestMemoryBombEndsTheWorkerNotTheService(t *testing.T) {
	ws, call := setup(t, nil)
	ctx := context.Background()
	ws.Save(ctx, "console:local", "bomb.pdf", bytes.NewReader(pdftest.MemoryBomb()))
	ws.Save(ctx, "console:local", "fine.pdf", bytes.NewReader(document("", "Still readable")))
	r := call("pdf_text", `{"path":"bomb.pdf"}`)
	if r.Code != tools.CodeInvalidArgument || !strings.Contains(r.Content, "This PDF could not be read: it asks for more memory than allowed.") {
		t.Fatalf("the bomb: %+v", r)
	}
	if r := call("pdf_text", `{"path":"fine.pdf"}`); r.Status != tools.StatusSuccess || !strings.Contains(r.Content, "Still readable") {
		t.Fatalf("the next PDF: %+v", r)
	}
	if _, err := Text(ctx, pdftest.MemoryBomb(), "mail.pdf", 100, Limits{}); err == nil || !strings.Contains(err.Error(), "more memory than allowed") {
		t.Fatalf("Text, as mail and web pages read PDFs: %v", err)
	}
}

// BenchmarkWorkerText is pdf_text's reading of a small PDF through the
// worker process, against the same reading in this process: the worker's
// cost per call.
func BenchmarkWorkerText(b *testing.B) {
	data := document("", "First page words", "Second page words", "Third page")
	b.Run("worker", func(b *testing.B) {
		for b.Loop() {
			if _, err := Text(context.Background(), data, "a.pdf", 2000, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := textOf(data, "a.pdf", 2000, textIn{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A PDF read from the person's Google Drive is theirs, as Drive's own
// results are: in a group it is shown on their turns only. One from the
// chat's files is the chat's.
func TestPDFFromDriveIsPersonal(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	drive := func(_ context.Context, id string, _ int64) (string, []byte, error) {
		return "statement.pdf", document("", "Ana's bank statement"), nil
	}
	r := tools.NewRegistry()
	if err := r.AddGroup(Group(), Tools(Config{Workspaces: ws, Drive: drive})...); err != nil {
		t.Fatal(err)
	}
	ws.Save(context.Background(), "telegram:-100", "menu.pdf", bytes.NewReader(document("", "Lunch menu")))
	x := tools.NewExecutor(r, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "telegram:-100", UserKey: "telegram:1001"})
	for _, c := range []struct {
		name, args string
		personal   bool
	}{
		{"pdf_text", `{"drive_file_id":"1abc"}`, true},
		{"pdf_info", `{"drive_file_id":"1abc"}`, true},
		{"pdf_text", `{"path":"menu.pdf"}`, false},
		{"pdf_info", `{"path":"menu.pdf"}`, false},
	} {
		res := x.Run(ctx, nil, []tools.Call{{ID: "1", Name: c.name, Arguments: c.args}})[0]
		if res.Status != tools.StatusSuccess || res.Personal != c.personal {
			t.Errorf("%s %s: personal %v, want %v (%+v)", c.name, c.args, res.Personal, c.personal, res)
		}
	}
}

// Found by review: a workspace PDF was checked through os.Root, then
// opened again by its path, so a link put in its place in between was
// followed out of the workspace. The file checked is the file read.
func TestPDFReadIsTheFileChecked(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "other.pdf")
	if err := os.WriteFile(outside, document("", "Another chat's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local"})
	if _, _, err := ws.Save(ctx, "console:local", "mine.pdf", bytes.NewReader(document("", "My own words"))); err != nil {
		t.Fatal(err)
	}
	r := tools.NewRegistry()
	sw := filestest.Swapping{Workspaces: ws, Dir: ws.Dir("console:local"), Outside: outside}
	if err := r.AddGroup(Group(), Tools(Config{Workspaces: sw})...); err != nil {
		t.Fatal(err)
	}
	res := tools.NewExecutor(r, nil).Run(ctx, nil, []tools.Call{{ID: "1", Name: "pdf_text", Arguments: `{"path":"mine.pdf"}`}})[0]
	if strings.Contains(res.Content, "secret") || !strings.Contains(res.Content, "My own words") {
		t.Errorf("pdf_text read %+v", res)
	}
}
