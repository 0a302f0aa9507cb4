// Package config reads loadout's configuration file: YAML whose keys are
// the yaml tags of the parts' own Config structs, ${VAR} references to
// the environment, and LOADOUT_<KEY> variables that win over the file.
// Every error names the key. Each part checks its own section with a
// Checker; cmd/loadout only assembles the sections.
package config

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// Set holds the keys the file or the environment gave, dotted
// ("llm.max_tool_rounds"): a key left out takes its part's default.
type Set map[string]bool

// Load reads raw (YAML) into dst, a pointer to a struct holding the
// defaults, then the LOADOUT_<KEY> variables of getenv. An unknown key, a
// variable that is not set or a value of the wrong kind is an error
// naming the key.
func Load(raw []byte, getenv func(string) string, dst any) (Set, error) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: Load needs a pointer to a struct, got %T", dst)
	}
	t := v.Elem().Type()
	set := Set{}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		lines := map[int]string{}
		if err := checkKeys(doc, t, "", lines, set); err != nil {
			return nil, err
		}
		if err := expandNode(doc, t, "", getenv); err != nil {
			return nil, err
		}
		if err := doc.Decode(dst); err != nil {
			return nil, fmt.Errorf("config: %s", nameLine(err, lines))
		}
	}
	if err := applyEnv(v.Elem(), "", getenv, set); err != nil {
		return nil, err
	}
	return set, nil
}

// Keys are the leaf keys of struct type t, dotted, in field order.
func Keys(t reflect.Type) []string {
	var out []string
	for _, f := range keyFields(t) {
		if f.typ.Kind() == reflect.Struct && f.typ != reflect.TypeOf(Duration(0)) {
			for _, k := range Keys(f.typ) {
				out = append(out, JoinKey(f.name, k))
			}
			continue
		}
		out = append(out, f.name)
	}
	return out
}

// IsEnvName reports whether s can name an environment variable.
func IsEnvName(s string) bool { return envName().MatchString(s) }

// Checker collects what is wrong with a section, each error naming its
// key ("section.key"). Set says which keys were given: a zero left out
// means the part's default and is not checked.
type Checker struct {
	Section string
	Set     Set
	errs    []error
}

// Key is the full name of a key of the section.
func (c *Checker) Key(key string) string { return JoinKey(c.Section, key) }

// Bad records that key's value is wrong.
func (c *Checker) Bad(key, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("config: %s: %s", c.Key(key), fmt.Sprintf(format, a...)))
}

// Err records err, which names its key itself.
func (c *Checker) Err(err error) {
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("config: %w", err))
	}
}

// given reports whether key was set or has a value other than zero.
func (c *Checker) given(key string, zero bool) bool { return c.Set[c.Key(key)] || !zero }

// AtLeast checks a number given for key against min.
func (c *Checker) AtLeast(key string, v, min int) {
	if c.given(key, v == 0) && v < min {
		c.Bad(key, "must be at least %d, got %d", min, v)
	}
}

// Duration checks a duration given for key against min.
func (c *Checker) Duration(key string, v, min time.Duration) {
	if c.given(key, v == 0) && v < min {
		c.Bad(key, "must be at least %s, got %s", min, v)
	}
}

// URL checks that a value given for key is an http(s) URL.
func (c *Checker) URL(key, raw string) {
	if raw == "" {
		return
	}
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.Bad(key, "must be an http(s) URL, got %q", raw)
	}
}

// Errors are the problems found.
func (c *Checker) Errors() []error { return c.errs }

// Section is a part's config that checks itself.
type Section interface {
	Check(c *Checker)
}

// Check checks each section under its name and returns every problem.
func Check(set Set, sections map[string]Section) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(sections)) {
		c := &Checker{Section: name, Set: set}
		sections[name].Check(c)
		errs = append(errs, c.errs...)
	}
	return errs
}
