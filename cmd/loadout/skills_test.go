package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/chat/chattest"
)

// Skills in skills.dir are listed in the system prompt and read with
// load_skill in `loadout chat`; a broken one stops start-up naming its
// file.
func TestSkillsInTheConsole(t *testing.T) {
	dir := t.TempDir()
	skill := filepath.Join(dir, "expense-report")
	os.MkdirAll(skill, 0o755)
	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: expense-report\ndescription: File an expense report from receipts\n---\nAsk for the receipts first."), 0o644)
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "skills:\n  dir: "+dir+"\n")
	model.Call("load_skill", `{"name":"expense-report"}`)
	model.Text("Send me the receipts.")
	out, err := runCLI(t, "file my expenses\n", "-config", cfgPath, "chat")
	if err != nil || !strings.Contains(out, "Send me the receipts.") {
		t.Fatalf("%v\n%s", err, out)
	}
	first := model.Requests()[0]
	if !strings.Contains(chattest.System(first), "- expense-report: File an expense report from receipts") {
		t.Errorf("the system prompt lacks the skill:\n%s", chattest.System(first))
	}
	if got := lastToolResult(model); !strings.Contains(got, "Ask for the receipts first.") {
		t.Errorf("load_skill gave %s", got)
	}

	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("no front matter"), 0o644)
	_, err = runCLI(t, "hi\n", "-config", cfgPath, "chat")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(skill, "SKILL.md")) {
		t.Fatalf("a broken skill: %v", err)
	}
}

func writeSkill(t testing.TB, dir string) {
	skill := filepath.Join(dir, "expense-report")
	os.MkdirAll(skill, 0o755)
	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: expense-report\ndescription: File an expense report from receipts\n---\nAsk for the receipts first."), 0o644)
}
