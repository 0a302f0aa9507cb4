package skills

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"loadout/tools"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, s *Set, args string) tools.Result {
	t.Helper()
	r := tools.NewRegistry()
	if err := r.Add(s.Tool()); err != nil {
		t.Fatal(err)
	}
	return tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{{ID: "1", Name: "load_skill", Arguments: args}})[0]
}

func TestSkills(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "expense-report", "SKILL.md"), "---\nname: expense-report\ndescription: >\n  File an expense report\n  from receipts.\nlicense: MIT\n---\n# Expense reports\n\nAsk for the receipts, then fill the form in reference.md.\n")
	write(t, filepath.Join(dir, "expense-report", "reference.md"), "Form fields: date, amount, purpose.")
	write(t, filepath.Join(dir, "expense-report", "scripts", "total.sh"), "echo total")
	write(t, filepath.Join(dir, "a-notes", "SKILL.md"), "---\nname: a-notes\ndescription: Take meeting notes\n---\nWrite bullet points.")
	write(t, filepath.Join(dir, "not-a-skill", "README.md"), "no SKILL.md here")
	secret := filepath.Join(t.TempDir(), "secret.txt")
	write(t, secret, "top secret")
	if err := os.Symlink(secret, filepath.Join(dir, "expense-report", "leak.md")); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Fatalf("%d skills", s.Len())
	}
	want := "- a-notes: Take meeting notes\n- expense-report: File an expense report from receipts."
	if l := s.Listing(); !strings.HasPrefix(l, "## Available Skills") || !strings.HasSuffix(l, want) {
		t.Errorf("listing:\n%s", l)
	}
	var got loaded
	r := call(t, s, `{"name":"expense-report"}`)
	if err := json.Unmarshal([]byte(r.Content), &got); err != nil {
		t.Fatal(r.Content)
	}
	if !strings.HasPrefix(got.Instructions, "# Expense reports") || strings.Join(got.Files, ",") != "reference.md,scripts/total.sh" {
		t.Errorf("load_skill gave %+v", got)
	}
	r = call(t, s, `{"name":"expense-report","file":"reference.md"}`)
	if !strings.Contains(r.Content, "Form fields") {
		t.Errorf("reading a file: %+v", r)
	}
	for _, escape := range []string{"../a-notes/SKILL.md", "/etc/passwd", "leak.md", "scripts/../../a-notes/SKILL.md"} {
		if r := call(t, s, `{"name":"expense-report","file":"`+escape+`"}`); r.Code != tools.CodeNotFound || strings.Contains(r.Content, "secret") || strings.Contains(r.Content, "bullet") {
			t.Errorf("%s escaped the skill's folder: %+v", escape, r)
		}
	}
	if r := call(t, s, `{"name":"taxes"}`); r.Code != tools.CodeNotFound || !strings.Contains(r.Content, "a-notes, expense-report") {
		t.Errorf("an unknown skill: %+v", r)
	}
	if empty, err := Load(""); err != nil || empty.Len() != 0 || empty.Listing() != "" {
		t.Errorf("no skills.dir: %v %v", empty, err)
	}
}

// A skill that cannot be read stops start-up with its file named.
func TestBadSkillsNameTheirFile(t *testing.T) {
	for text, want := range map[string]string{
		"# no front matter":                                                       "no front matter",
		"---\nname: bad\ndescription: d\n":                                        "not closed",
		"---\nname: [unclosed\n---\nbody":                                         "front matter",
		"---\ndescription: d\n---\nbody":                                          "name is required",
		"---\nname: Bad_Name\ndescription: d\n---\nbody":                          "lowercase",
		"---\nname: other\ndescription: d\n---\nbody":                             "must match its folder",
		"---\nname: skill\n---\nbody":                                             "description is required",
		"---\nname: skill\ndescription: " + strings.Repeat("x", 1025) + "\n---\n": "longer than 1024",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "skill", "SKILL.md")
		write(t, path, text)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "skills.dir: ") {
			t.Errorf("%q: %v, want an error naming %s and saying %q", text, err, path, want)
		}
	}
}
