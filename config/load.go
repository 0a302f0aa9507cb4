package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "30s" or "2m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 30s or 2m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Std returns the value as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// envRef is ${VAR} or ${VAR:-default}.
var envRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`) })

// expandNode replaces ${VAR} and ${VAR:-default} in the scalar values
// under n, after YAML parsing: a value read from the environment is taken
// literally, whatever '#', ': ' or '*' it holds. A variable that is
// referenced without a default and not set is an error naming the key.
func expandNode(n *yaml.Node, t reflect.Type, key string, getenv func(string) string) error {
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			// Values of a map (an MCP server's env and headers).
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := expandNode(n.Content[i+1], t.Elem(), JoinKey(key, n.Content[i].Value), getenv); err != nil {
					return err
				}
			}
			return nil
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			f, ok := yamlField(t, n.Content[i].Value)
			if !ok {
				continue // checkKeys has refused it
			}
			if err := expandNode(n.Content[i+1], f.typ, JoinKey(key, n.Content[i].Value), getenv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil
		}
		for i, c := range n.Content {
			if err := expandNode(c, t.Elem(), fmt.Sprintf("%s[%d]", key, i), getenv); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing string
		n.Value = envRef().ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRef().FindStringSubmatch(m)
			if v := getenv(sub[1]); v != "" {
				return v
			}
			if sub[2] == "" && missing == "" {
				missing = sub[1]
			}
			return sub[3]
		})
		if missing != "" {
			return fmt.Errorf("config: %s (line %d): environment variable %s is not set (write ${%s:-} to allow it to be empty)",
				key, n.Line, missing, missing)
		}
		// A string takes the text as it is; other kinds are read from it.
		n.Style = 0
		n.Tag = ""
		if t.Kind() == reflect.String {
			n.Tag = "!!str"
		}
	}
	return nil
}

// applyEnv sets each key from LOADOUT_<KEY> when that variable is set: the
// dotted key in capitals with '_' for '.', e.g. LOADOUT_LLM_BASE_URL; a
// list is comma-separated. The environment wins over the file.
func applyEnv(v reflect.Value, key string, getenv func(string) string, set map[string]bool) error {
	for _, f := range keyFields(v.Type()) {
		k := JoinKey(key, f.name)
		fv := v.FieldByIndex(f.index)
		if f.typ.Kind() == reflect.Struct {
			if err := applyEnv(fv, k, getenv, set); err != nil {
				return err
			}
			continue
		}
		envName := envVar(k)
		raw := getenv(envName)
		if raw == "" {
			continue
		}
		set[k] = true
		bad := func(want string) error {
			return fmt.Errorf("config: %s: %s is not %s", k, envName, want)
		}
		switch t := f.typ; {
		case t == reflect.TypeOf(Duration(0)) || t == reflect.TypeOf(time.Duration(0)):
			d, err := time.ParseDuration(strings.TrimSpace(raw))
			if err != nil || d < 0 {
				return bad("a duration like 30s or 2m")
			}
			fv.SetInt(int64(d))
		case t.Kind() == reflect.String:
			fv.SetString(raw)
		case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
			n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
			if err != nil {
				return bad("a whole number")
			}
			fv.SetInt(n)
		case t.Kind() == reflect.Float64:
			x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return bad("a number")
			}
			fv.SetFloat(x)
		case t.Kind() == reflect.Bool, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool:
			b, err := strconv.ParseBool(strings.TrimSpace(raw))
			if err != nil {
				return bad("true or false")
			}
			if t.Kind() == reflect.Pointer {
				fv.Set(reflect.ValueOf(&b))
			} else {
				fv.SetBool(b)
			}
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
			var list []string
			for item := range strings.SplitSeq(raw, ",") {
				if item = strings.TrimSpace(item); item != "" {
					list = append(list, item)
				}
			}
			fv.Set(reflect.ValueOf(list))
		default:
			return fmt.Errorf("config: %s cannot be set from the environment (%s)", k, t)
		}
	}
	return nil
}

// envVar is the variable that sets a dotted key.
// envName is the form of an environment variable's name.
var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func envVar(key string) string {
	return "LOADOUT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// JoinKey is name under prefix: "llm" and "model" make "llm.model".
func JoinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// keyField is one config key of a struct: its name, where it sits (inside
// inlined structs), its type and its secret tag.
type keyField struct {
	name   string
	index  []int
	typ    reflect.Type
	secret string
}

// keyFields lists the keys of struct type t, with the keys of inlined
// fields (`yaml:",inline"`) in place. Unexported fields and `yaml:"-"` are
// not keys. A type's list is made once (the config's types are a fixed
// few, walked for every key) and shared: callers do not change it.
func keyFields(t reflect.Type) []keyField {
	if kf, ok := keyFieldsOf.Load(t); ok {
		return kf.([]keyField)
	}
	kf, _ := keyFieldsOf.LoadOrStore(t, listKeyFields(t))
	return kf.([]keyField)
}

// keyFieldsOf holds keyFields' lists by type.
var keyFieldsOf sync.Map

func listKeyFields(t reflect.Type) []keyField {
	var out []keyField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for _, in := range keyFields(f.Type) {
				in.index = append([]int{i}, in.index...)
				out = append(out, in)
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out = append(out, keyField{name: name, index: []int{i}, typ: f.Type, secret: f.Tag.Get("secret")})
	}
	return out
}

func yamlField(t reflect.Type, name string) (keyField, bool) {
	for _, f := range keyFields(t) {
		if f.name == name {
			return f, true
		}
	}
	return keyField{}, false
}

// checkKeys walks the YAML mapping against the struct type and reports the
// first unknown key with its full dotted name. It records which key sits on
// each line so decode errors can name keys too.
func checkKeys(n *yaml.Node, t reflect.Type, prefix string, lines map[int]string, set map[string]bool) error {
	if n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice {
		// A list of sections (mcp.servers) is checked item by item.
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i), lines, map[string]bool{}); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]keyField{}
	for _, f := range keyFields(t) {
		fields[f.name] = f
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := JoinKey(prefix, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			sort.Strings(known)
			return fmt.Errorf("config: unknown key %q (line %d); known keys here: %s", key, k.Line, strings.Join(known, ", "))
		}
		lines[v.Line] = key
		set[key] = true
		if err := checkKeys(v, f.typ, key, lines, set); err != nil {
			return err
		}
	}
	return nil
}

var lineRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+): `) })

// nameLine rewrites yaml's "line N: …" into "key (line N): …".
func nameLine(err error, lines map[int]string) string {
	return lineRef().ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(lineRef().FindStringSubmatch(m)[1])
		if key, ok := lines[n]; ok {
			return fmt.Sprintf("%s (line %d): ", key, n)
		}
		return m
	})
}
