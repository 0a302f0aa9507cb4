package layout

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Sizes a newcomer can read: a file's parts get names (a file of their
// own) before it passes maxFileLines, and the program's command, which
// only assembles the parts, stays under maxCommandLines.
const (
	maxFileLines    = 600
	maxCommandLines = 1200
)

// sources are the non-test Go files of the module's packages (what ships),
// by package.
func sources(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,GoFiles,CgoFiles", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath, Dir   string
			GoFiles, CgoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.CgoFiles...) {
			files[rel(p.ImportPath)] = append(files[rel(p.ImportPath)], filepath.Join(p.Dir, f))
		}
	}
	return files
}

func lines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestSizesStayReadable(t *testing.T) {
	byPkg := sources(t)
	if len(byPkg["cmd/loadout"]) == 0 {
		t.Fatal("go list reported no files of cmd/loadout: the sizes would check nothing")
	}
	for p, files := range byPkg {
		total := 0
		for _, f := range files {
			n := lines(t, f)
			total += n
			if n > maxFileLines {
				t.Errorf("%s has %d lines, over %d: split it where its parts have names", p+"/"+filepath.Base(f), n, maxFileLines)
			}
		}
		if p == "cmd/loadout" && total > maxCommandLines {
			t.Errorf("cmd/loadout has %d lines, over %d: what is not assembly belongs to the package it is about", total, maxCommandLines)
		}
	}
}
