package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat/chattest"
)

// In `loadout chat` the model writes a file to the chat's workspace,
// runs an allowed command on it, and sends it: the console shows its
// path.
func TestFilesAndExecInTheConsole(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, dbPath := writeConfig(t, model.URL, "exec:\n  enabled: true\n  allow: [wc]\n")
	model.Call("load_tool_group", `{"group_name":"files"}`)
	model.Call("files", `{"action":"write","path":"list.txt","content":"one\ntwo\nthree\n"}`)
	model.Call("load_tool_group", `{"group_name":"exec"}`)
	model.Call("exec", `{"command":"wc","args":["-l","list.txt"]}`)
	model.Call("files", `{"action":"send","path":"list.txt"}`)
	model.Text("Sent.")
	out, err := runCLI(t, "make me a list\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Sent.") {
		t.Fatalf("%v\n%s", err, out)
	}
	path := filepath.Join(filepath.Dir(dbPath), "files", "console_3alocal", "list.txt")
	if b, err := os.ReadFile(path); err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("the workspace file: %q %v", b, err)
	}
	if !strings.Contains(out, "[file list.txt: "+path+"]") {
		t.Errorf("the console did not show the sent file:\n%s", out)
	}
	reqs := model.Requests()
	wc := reqs[4].Messages
	if got := wc[len(wc)-1].Content; !strings.Contains(got, `3 list.txt`) {
		t.Errorf("exec gave the model %s", got)
	}
}

// llm.vision reads pictures from the chat's workspace, and nothing else.
func TestVisionReadsWorkspacePictures(t *testing.T) {
	a, _ := bareApp(t)
	ctx := context.Background()
	name, _, err := a.workspaces.Save(ctx, "telegram:42", "cat.png", strings.NewReader("png!"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := a.image(ctx, "telegram:42", name)
	if err != nil || img.MIME != "image/png" || string(img.Data) != "png!" {
		t.Fatalf("image = %+v, %v", img, err)
	}
	a.workspaces.Save(ctx, "telegram:42", "notes.txt", strings.NewReader("x"))
	for _, bad := range []struct{ chat, name string }{{"telegram:42", "notes.txt"}, {"telegram:7", "cat.png"}, {"telegram:42", "../telegram_3a7/cat.png"}} {
		if _, err := a.image(ctx, bad.chat, bad.name); err == nil {
			t.Errorf("%s in %s was read", bad.name, bad.chat)
		}
	}
}

// In `loadout chat` the model reads a PDF the person has in the chat's
// workspace.
func TestPDFInTheConsole(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, dbPath := writeConfig(t, model.URL, "")
	doc, err := os.ReadFile("testdata/invoice.pdf")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(dbPath), "files", "console_3alocal")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "invoice.pdf"), doc, 0o600)
	model.Call("load_tool_group", `{"group_name":"pdf"}`)
	model.Call("pdf_text", `{"path":"invoice.pdf"}`)
	model.Text("19 euros.")
	if out, err := runCLI(t, "what is the invoice total?\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "19 euros.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, "Invoice 42 total 19 euros") {
		t.Errorf("pdf_text gave %s", got)
	}
}
