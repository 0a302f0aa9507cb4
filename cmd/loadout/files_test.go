package main

import (
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
