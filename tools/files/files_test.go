package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"loadout/tools"
)

type sent struct {
	mu    sync.Mutex
	files []string
}

func (s *sent) SendFile(ctx context.Context, chatKey, name string, f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	s.files = append(s.files, chatKey+"|"+name+"|"+string(b))
	return nil
}

func call(t *testing.T, w *Workspaces, s Sender, chatKey, args string) tools.Result {
	t.Helper()
	r := tools.NewRegistry()
	if err := r.Add(w.Tool(s)); err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: chatKey})
	return tools.NewExecutor(r, nil).Run(ctx, nil, []tools.Call{{ID: "1", Name: "files", Arguments: args}})[0]
}

func TestFilesStayInTheChatsWorkspace(t *testing.T) {
	w, err := New(Config{Dir: t.TempDir(), MaxChars: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &sent{}
	chat := "telegram:42"
	if r := call(t, w, s, chat, `{"action":"write","path":"notes/todo.md","content":"buy milk and eggs"}`); r.Status != tools.StatusSuccess {
		t.Fatalf("write: %+v", r)
	}
	call(t, w, s, chat, `{"action":"append","path":"notes/todo.md","content":"\nbread"}`)
	r := call(t, w, s, chat, `{"action":"read","path":"notes/todo.md"}`)
	var c content
	json.Unmarshal([]byte(r.Content), &c)
	if c.Content != "buy milk a" || c.NextOffset != 10 || c.Type != "text/markdown" {
		t.Fatalf("read: %+v", r)
	}
	var c2 content
	json.Unmarshal([]byte(call(t, w, s, chat, `{"action":"read","path":"notes/todo.md","offset":20}`).Content), &c2)
	if c2.Content != "ead" || c2.NextOffset != 0 {
		t.Fatalf("read on: %+v", c2)
	}
	// Another chat sees none of it.
	if r := call(t, w, s, "slack:T1:C2", `{"action":"read","path":"notes/todo.md"}`); r.Code != tools.CodeNotFound {
		t.Errorf("another chat read the file: %+v", r)
	}
	outside := filepath.Join(t.TempDir(), "outside.txt")
	os.WriteFile(outside, []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(w.Dir(chat), "link"))
	for _, p := range []string{"../slack_3aT1_3aC2/x", "/etc/passwd", "link", "notes/../../x", "..", outside} {
		for _, action := range []string{"read", "write", "delete"} {
			r := call(t, w, s, chat, `{"action":"`+action+`","path":"`+p+`","content":"x"}`)
			if p == "link" && action == "delete" {
				continue // removes the link itself, inside the workspace
			}
			if r.Status != tools.StatusError || strings.Contains(r.Content, "secret") || r.Code == tools.CodeInternal {
				t.Errorf("%s %s: %+v", action, p, r)
			}
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Error("a file outside the workspace was changed")
	}
	r = call(t, w, s, chat, `{"action":"list"}`)
	if !strings.Contains(r.Content, `"path":"notes/todo.md"`) || strings.Contains(r.Content, `"path":"link"`) {
		t.Errorf("list: %s", r.Content)
	}
	if r := call(t, w, s, chat, `{"action":"send","path":"notes/todo.md"}`); r.Status != tools.StatusSuccess || len(s.files) != 1 || s.files[0] != "telegram:42|todo.md|buy milk and eggs\nbread" {
		t.Errorf("send: %+v %q", r, s.files)
	}
	if r := call(t, w, nil, chat, `{"action":"send","path":"notes/todo.md"}`); r.Code != "not_available" {
		t.Errorf("send without a sender: %+v", r)
	}
	if r := call(t, w, s, chat, `{"action":"delete","path":"notes/todo.md"}`); r.Status != tools.StatusSuccess {
		t.Errorf("delete: %+v", r)
	}
	if r := call(t, w, s, chat, `{"action":"read"}`); r.Code != tools.CodeMissingParameter || !strings.Contains(r.Content, "required_param") {
		t.Errorf("read without a path: %+v", r)
	}
}

func TestCapsAndSave(t *testing.T) {
	w, err := New(Config{Dir: t.TempDir(), MaxFileBytes: 10, MaxWorkspaceBytes: 15})
	if err != nil {
		t.Fatal(err)
	}
	chat := "console:local"
	if r := call(t, w, nil, chat, `{"action":"write","path":"a","content":"01234567890"}`); r.Code != "too_large" {
		t.Errorf("a file over the cap: %+v", r)
	}
	call(t, w, nil, chat, `{"action":"write","path":"a","content":"0123456789"}`)
	if r := call(t, w, nil, chat, `{"action":"write","path":"b","content":"012345"}`); r.Code != "too_large" || !strings.Contains(r.Content, "workspace") {
		t.Errorf("a full workspace: %+v", r)
	}
	name, n, err := w.Save(context.Background(), chat, "../../report.pdf", strings.NewReader("12345"))
	if err != nil || name != "report.pdf" || n != 5 {
		t.Fatalf("Save = %q %d %v", name, n, err)
	}
	_, _, err = w.Save(context.Background(), chat, "report.pdf", strings.NewReader("123"))
	var ce *CapError
	if !errors.As(err, &ce) || ce.File {
		t.Fatalf("saving into a full workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir(chat), "report-2.pdf")); !os.IsNotExist(err) {
		t.Error("a refused file was kept")
	}
	call(t, w, nil, chat, `{"action":"delete","path":"a"}`)
	name, _, err = w.Save(context.Background(), chat, "report.pdf", strings.NewReader("123"))
	if err != nil || name != "report-2.pdf" {
		t.Fatalf("a second report.pdf = %q %v", name, err)
	}
	if p, err := w.Path(chat, "report-2.pdf"); err != nil || !strings.HasPrefix(p, w.Dir(chat)) {
		t.Errorf("Path = %q %v", p, err)
	}
	w2, _ := New(Config{Dir: t.TempDir()})
	w2.Save(context.Background(), chat, "img.bin", strings.NewReader("\x00\x01\x02"))
	if r := call(t, w2, nil, chat, `{"action":"read","path":"img.bin"}`); !strings.Contains(r.Content, "binary") {
		t.Errorf("a binary file: %+v", r)
	}
	if w.Dir("a:b") == w.Dir("a_3ab") || w.Dir("a/b") == w.Dir("a_2fb") {
		t.Error("two chat keys share a workspace")
	}
}

// The property behind the summary of files: for generated writes,
// appends and deletes (nested, spaced, non-ASCII and dotted paths), every
// file the call creates, changes or removes in the workspace is named in
// the summary the person approves, by its path in the workspace.
func TestFilesSummaryNamesWhatChanges(t *testing.T) {
	dir := t.TempDir()
	w, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	chat := "telegram:42"
	tool := w.Tool(&sent{})
	snapshot := func() map[string]string {
		out := map[string]string{}
		root := w.Dir(chat)
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				out[filepath.ToSlash(rel)] = string(b)
			}
			return nil
		})
		return out
	}
	rng := rand.New(rand.NewPCG(24, 4))
	pieces := []string{"notes", "a b", "caf\u00e9", ".", "x.txt", "plan.md", "..", "deep", "\u00fc.csv"}
	changed := 0
	for i := range 200 {
		path := pieces[rng.IntN(len(pieces))]
		for range rng.IntN(3) {
			path += "/" + pieces[rng.IntN(len(pieces))]
		}
		action := []string{"write", "append", "delete", "delete"}[rng.IntN(4)]
		args, _ := json.Marshal(map[string]string{"action": action, "path": path, "content": fmt.Sprint("line ", i)})
		in, err := tool.Decode(args)
		if err != nil {
			continue
		}
		summary := tools.Summary(context.Background(), tool.Definition, tools.Input{Value: in})
		before := snapshot()
		call(t, w, &sent{}, chat, string(args))
		after := snapshot()
		for p, b := range after {
			if before[p] != b && !strings.Contains(summary, "'"+p+"'") {
				t.Errorf("case %d: %s wrote %q; summary %q", i, args, p, summary)
			}
			if before[p] != b {
				changed++
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				changed++
				if !strings.Contains(summary, "'"+p+"'") {
					t.Errorf("case %d: %s removed %q; summary %q", i, args, p, summary)
				}
			}
		}
	}
	if changed < 40 {
		t.Fatalf("only %d files changed", changed)
	}
}

// Found by probing: `ln ../telegram_…/diary.txt hard.txt` (through exec)
// then files read hard.txt returned another chat's diary; os.Root keeps
// paths inside the workspace, not inodes. A file with another link is not
// read, written, sent or handed out, and the other chat's file is left as
// it was.
func TestHardLinkedFileIsNotTheChats(t *testing.T) {
	w, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := &sent{}
	ana, bea := "telegram:1", "telegram:2"
	if r := call(t, w, s, bea, `{"action":"write","path":"diary.txt","content":"Bea's secret"}`); r.Status != tools.StatusSuccess {
		t.Fatal(r)
	}
	if r := call(t, w, s, ana, `{"action":"write","path":"mine.txt","content":"Ana's"}`); r.Status != tools.StatusSuccess {
		t.Fatal(r)
	}
	diary := filepath.Join(w.Dir(bea), "diary.txt")
	if err := os.Link(diary, filepath.Join(w.Dir(ana), "hard.txt")); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"action":"read","path":"hard.txt"}`,
		`{"action":"write","path":"hard.txt","content":"overwritten"}`,
		`{"action":"append","path":"hard.txt","content":"more"}`,
		`{"action":"send","path":"hard.txt"}`,
	} {
		r := call(t, w, s, ana, args)
		if r.Code != tools.CodePermission || strings.Contains(r.Content, "secret") {
			t.Errorf("%s: %+v", args, r)
		}
	}
	if _, err := w.Path(ana, "hard.txt"); err == nil {
		t.Error("Path handed out the linked file")
	}
	if b, _ := os.ReadFile(diary); string(b) != "Bea's secret" {
		t.Errorf("Bea's diary is now %q", b)
	}
	if len(s.files) != 0 {
		t.Errorf("sent %q", s.files)
	}
	// The chat's own files still work, and the link can be deleted.
	if r := call(t, w, s, ana, `{"action":"read","path":"mine.txt"}`); r.Status != tools.StatusSuccess {
		t.Errorf("own file: %+v", r)
	}
	if r := call(t, w, s, ana, `{"action":"delete","path":"hard.txt"}`); r.Status != tools.StatusSuccess {
		t.Errorf("delete the link: %+v", r)
	}
	if b, _ := os.ReadFile(diary); string(b) != "Bea's secret" {
		t.Errorf("Bea's diary after the delete: %q", b)
	}
}

// swapSender is a channel that is slow to read what it sends: before it
// does, a link to a file outside the workspace has taken the file's
// place (what a command in the workspace can do in between).
type swapSender struct {
	sent
	outside string
}

func (s *swapSender) swap(p string) {
	os.Remove(p)
	os.Symlink(s.outside, p)
}

func (s *swapSender) SendFile(ctx context.Context, chatKey, name string, f *os.File) error {
	s.swap(f.Name())
	return s.sent.SendFile(ctx, chatKey, name, f)
}

// Found by review: send checked the file through os.Root, then handed
// the channel its path to open again, so a link put in its place in
// between was followed out of the workspace. The file checked is the
// file sent.
func TestSendSendsTheFileChecked(t *testing.T) {
	w, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "diary.txt")
	if err := os.WriteFile(outside, []byte("another chat's diary"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &swapSender{outside: outside}
	chat := "telegram:42"
	if r := call(t, w, s, chat, `{"action":"write","path":"mine.txt","content":"my own words"}`); r.Status != tools.StatusSuccess {
		t.Fatalf("write: %+v", r)
	}
	call(t, w, s, chat, `{"action":"send","path":"mine.txt"}`)
	if len(s.files) != 1 || s.files[0] != chat+"|mine.txt|my own words" {
		t.Errorf("sent %q", s.files)
	}
}
