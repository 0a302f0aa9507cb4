package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type section struct {
	Workers int      `yaml:"workers"`
	Timeout Duration `yaml:"timeout"`
	URL     string   `yaml:"url"`
	Secret  string   `yaml:"secret"`
}

type file struct {
	Part section `yaml:"part"`
}

func (s section) Check(c *Checker) {
	c.AtLeast("workers", s.Workers, 1)
	c.Duration("timeout", s.Timeout.Std(), time.Second)
	c.URL("url", s.URL)
}

// A file is read with its environment; every problem names its key, a
// zero that was left out is the default and not checked, one that was
// written is.
func TestLoadAndCheckNameTheKey(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{"SECRET": "s#: *x", "LOADOUT_PART_WORKERS": "3"}[k]
	}
	var f file
	set, err := Load([]byte("part:\n  timeout: 2s\n  secret: ${SECRET}\n"), getenv, &f)
	if err != nil || f.Part.Workers != 3 || f.Part.Timeout.Std() != 2*time.Second || f.Part.Secret != "s#: *x" || !set["part.workers"] {
		t.Fatalf("%+v, %v, %v", f, set, err)
	}
	if _, err := Load([]byte("part:\n  wokers: 1\n"), getenv, &f); err == nil || !strings.Contains(err.Error(), `"part.wokers"`) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := Load([]byte("part:\n  secret: ${NOPE}\n"), getenv, &f); err == nil || !strings.Contains(err.Error(), "part.secret") || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("unset variable: %v", err)
	}
	if errs := Check(Set{}, map[string]Section{"part": section{}}); len(errs) != 0 {
		t.Fatalf("defaults refused: %v", errs)
	}
	errs := Check(Set{"part.workers": true}, map[string]Section{"part": section{URL: "ftp://x", Timeout: Duration(time.Millisecond)}})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{"config: part.workers: must be at least 1, got 0", "config: part.timeout: must be at least 1s, got 1ms", `config: part.url: must be an http(s) URL, got "ftp://x"`}
	if !slices.Equal(got, want) {
		t.Fatalf("errors %q", got)
	}
	if keys := Keys(reflect.TypeOf(file{})); !slices.Equal(keys, []string{"part.workers", "part.timeout", "part.url", "part.secret"}) {
		t.Fatalf("keys %q", keys)
	}
}
