// Package skills loads skills: folders holding a SKILL.md (YAML front
// matter with name and description, then Markdown instructions) and any
// files it refers to, in the format Agent Skills use. The system prompt
// lists each skill in one line; load_skill returns a skill's
// instructions and lists its other files, which it also reads.
package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"loadout/tools"
)

// Skill is one loaded skill.
type Skill struct {
	Name        string
	Description string
	// Dir is the skill's folder; Body its instructions.
	Dir  string
	Body string
	// Files are the folder's other files, relative, sorted.
	Files []string
}

// Set is the skills of a directory.
type Set struct {
	skills []Skill
	byName map[string]*Skill
}

// Limits of what a skill may hold.
const (
	maxName        = 64
	maxDescription = 1024
	maxFileBytes   = 256 << 10
	maxFiles       = 200
)

// Load reads every dir/*/SKILL.md. An empty dir is an empty set; a skill
// that cannot be read is an error naming its file (skills.dir).
func Load(dir string) (*Set, error) {
	s := &Set{byName: map[string]*Skill{}}
	if dir == "" {
		return s, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("skills.dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name(), "SKILL.md")
		raw, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("skills.dir: %w", err)
		}
		sk, err := parse(raw, e.Name())
		if err != nil {
			return nil, fmt.Errorf("skills.dir: %s: %w", path, err)
		}
		sk.Dir = filepath.Join(dir, e.Name())
		if sk.Files, err = files(sk.Dir); err != nil {
			return nil, fmt.Errorf("skills.dir: %s: %w", sk.Dir, err)
		}
		s.skills = append(s.skills, sk)
	}
	sort.Slice(s.skills, func(i, j int) bool { return s.skills[i].Name < s.skills[j].Name })
	for i := range s.skills {
		s.byName[s.skills[i].Name] = &s.skills[i]
	}
	return s, nil
}

// parse reads a SKILL.md of the folder named folder.
func parse(raw []byte, folder string) (Skill, error) {
	raw = bytes.TrimPrefix(raw, []byte("\ufeff"))
	text := strings.ReplaceAll(string(raw), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return Skill{}, fmt.Errorf("no front matter: the file must start with a line '---', then name and description, then '---'")
	}
	front, body, ok := strings.Cut(text[4:], "\n---")
	if !ok {
		return Skill{}, fmt.Errorf("the front matter is not closed by a line '---'")
	}
	body = strings.TrimPrefix(body, "\n")
	var meta struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(front), &meta); err != nil {
		return Skill{}, fmt.Errorf("front matter: %w", err)
	}
	switch {
	case meta.Name == "":
		return Skill{}, fmt.Errorf("front matter: name is required")
	case !validName(meta.Name):
		return Skill{}, fmt.Errorf("front matter: name %q must be lowercase letters, digits and single hyphens, at most %d characters", meta.Name, maxName)
	case meta.Name != folder:
		return Skill{}, fmt.Errorf("front matter: name %q must match its folder %q", meta.Name, folder)
	case strings.TrimSpace(meta.Description) == "":
		return Skill{}, fmt.Errorf("front matter: description is required")
	case utf8.RuneCountInString(meta.Description) > maxDescription:
		return Skill{}, fmt.Errorf("front matter: description is longer than %d characters", maxDescription)
	}
	return Skill{Name: meta.Name, Description: strings.Join(strings.Fields(meta.Description), " "), Body: strings.TrimSpace(body)}, nil
}

func validName(n string) bool {
	if len(n) == 0 || len(n) > maxName || n[0] == '-' || n[len(n)-1] == '-' || strings.Contains(n, "--") {
		return false
	}
	for _, c := range n {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// files lists a skill folder's regular files besides SKILL.md.
func files(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "SKILL.md" {
			return nil
		}
		if len(out) == maxFiles {
			return fs.SkipAll
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out, err
}

// Len is the number of skills.
func (s *Set) Len() int { return len(s.skills) }

// Listing is the system prompt's section on skills, "" when there are
// none.
func (s *Set) Listing() string {
	if len(s.skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Available Skills\n\nBefore doing what a skill describes, call load_skill with its name and follow its instructions.\n")
	for _, sk := range s.skills {
		fmt.Fprintf(&b, "- %s: %s\n", sk.Name, sk.Description)
	}
	return strings.TrimSpace(b.String())
}

type input struct {
	Name string `json:"name" desc:"the skill's name"`
	File string `json:"file,omitempty" desc:"a file of the skill, instead" reach:"-"`
}

type loaded struct {
	Name         string   `json:"name"`
	Instructions string   `json:"instructions"`
	Files        []string `json:"files,omitempty"`
	Note         string   `json:"note,omitempty"`
}

type fileContent struct {
	Skill   string `json:"skill"`
	File    string `json:"file"`
	Content string `json:"content"`
	Note    string `json:"note,omitempty"`
}

// Tool is load_skill.
func (s *Set) Tool() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "load_skill",
		Examples:    []string{"use the procedure we wrote down for this", "follow the instructions of a skill", "how do we usually do this task", "use our checklist for this", "the playbook we have for onboarding", "apply the team's standard procedure", "which skills can you use", "follow our usual steps for a release", "the how-to guide we keep for expenses", "load the skill", "our team's instructions for support tickets", "we have a procedure for this, follow it"},
		Description: "A skill's instructions, or one of its files.",
		ReadOnly:    true,
		Timeout:     5 * time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		sk, ok := s.byName[strings.TrimSpace(in.Name)]
		if !ok {
			names := make([]string, len(s.skills))
			for i, k := range s.skills {
				names[i] = k.Name
			}
			return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no skill '%s'.", in.Name),
				Suggestion: "Use a name from the Available Skills: " + strings.Join(names, ", ") + "."}
		}
		if in.File == "" {
			out := loaded{Name: sk.Name, Instructions: sk.Body, Files: sk.Files}
			if len(sk.Files) > 0 {
				out.Note = "Read a file with load_skill, this name and file."
			}
			return out, nil
		}
		return readFile(sk, in.File)
	})
}

// readFile reads one file of a skill, never outside its folder.
func readFile(sk *Skill, name string) (any, error) {
	root, err := os.OpenRoot(sk.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(strings.TrimPrefix(name, "./")))
	if err != nil {
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("Skill '%s' has no file '%s'.", sk.Name, name),
			Suggestion: "Use one of the files load_skill listed: " + strings.Join(sk.Files, ", ") + "."}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("'%s' is not a file of skill '%s'.", name, sk.Name)}
	}
	buf := make([]byte, min(st.Size(), maxFileBytes))
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	out := fileContent{Skill: sk.Name, File: name}
	if !utf8.Valid(buf) || bytes.IndexByte(buf, 0) >= 0 {
		out.Note = fmt.Sprintf("A binary file of %d bytes; it cannot be shown as text.", st.Size())
		return out, nil
	}
	out.Content = string(buf)
	if st.Size() > maxFileBytes {
		out.Note = fmt.Sprintf("The file has %d bytes; the first %d are above.", st.Size(), maxFileBytes)
	}
	return out, nil
}
