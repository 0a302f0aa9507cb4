package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README is a door: what loadout is, the two commands, a minimal
// config and links; the rest is in docs/. Every link between the pages
// leads to a file that exists.
func TestReadmeIsADoorAndEveryLinkLeadsSomewhere(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; keep it to 250 and move the rest to docs/", n)
	}
	for _, cmd := range []string{"go run -tags sqlite_fts5 ./cmd/loadout chat", "go test -race -tags sqlite_fts5 ./..."} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md lacks %q", cmd)
		}
	}
	pages, _ := filepath.Glob("../../docs/*.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, page := range append(pages, "../../README.md") {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(page), target)
			}
		}
	}
}
