package config

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// Secrecy is what a key declares secret of its value, with a `secret`
// tag beside its yaml tag. Each part declares the secrets of its own
// section where it defines it; Entries and Secrets read the
// declarations, and everything that must keep a secret (the logger, the
// web console's configuration page, an MCP server's stderr) takes what
// they find, so there is one definition of a secret.
type Secrecy int

const (
	// Public is a key without a secret tag: its value may be shown and
	// logged.
	Public Secrecy = iota
	// Whole, `secret:"true"`: the value is a secret; of a list every
	// item, of a map every value (the environment or the headers handed
	// to another program).
	Whole
	// Carried, `secret:"url"`: the value is a URL, a DSN or a command
	// line (a list of arguments), shown, but the credentials it carries
	// are secrets: a URL's password (for http(s) and ws(s), its user name
	// when it has no password: a token written as https://TOKEN@host),
	// its query parameters named like credentials (api_key=, token=,
	// key=, …), the values of name=value pairs so named (a PostgreSQL
	// DSN's password=, an argument --api-key=…), and in a list of
	// arguments the one after a flag so named (--api-key VALUE).
	Carried
	// EnvNamed, `secret:"env"`: a map whose keys name environment
	// variables: their values in the process's environment are secrets
	// (tools.custom_secrets).
	EnvNamed
)

// secrecies are the values a secret tag may have.
var secrecies = map[string]Secrecy{"": Public, "true": Whole, "url": Carried, "env": EnvNamed}

// Entry is one key of a configuration, as Entries finds it.
type Entry struct {
	// Key is the dotted key, with the index of an item of a list of
	// sections: "mcp.servers[0].env".
	Key string
	// Value is the key's value: a string, a number, a list, a map…
	Value reflect.Value
	// Secrecy is what the key declares secret.
	Secrecy Secrecy
}

// Entries are the keys of section (a struct), each under prefix, in
// field order: the keys of nested and inlined sections in place, a list
// of sections item by item; anything else (a map, a list of strings, a
// duration) is one entry. A secret tag Secrecy does not name, on a
// section, or on a value of a kind its Secrecy cannot hold is a
// programming error: Entries panics, naming the key.
func Entries(prefix string, section any) []Entry {
	var out []Entry
	walk(prefix, reflect.ValueOf(section), &out)
	return out
}

func walk(prefix string, v reflect.Value, out *[]Entry) {
	for _, f := range keyFields(v.Type()) {
		key := JoinKey(prefix, f.name)
		fv := v.FieldByIndex(f.index)
		s, ok := secrecies[f.secret]
		if !ok {
			panic(fmt.Sprintf("config: %s: secret tag %q is not true, url or env", key, f.secret))
		}
		switch {
		case isSection(f.typ):
			if s != Public {
				panic(fmt.Sprintf("config: %s: a section cannot be secret; tag its keys", key))
			}
			walk(key, fv, out)
		case f.typ.Kind() == reflect.Slice && isSection(f.typ.Elem()):
			if s != Public {
				panic(fmt.Sprintf("config: %s: a list of sections cannot be secret; tag their keys", key))
			}
			for i := range fv.Len() {
				walk(fmt.Sprintf("%s[%d]", key, i), fv.Index(i), out)
			}
		default:
			if !holds(s, f.typ) {
				panic(fmt.Sprintf("config: %s: a %s cannot be declared secret:%q", key, f.typ, f.secret))
			}
			*out = append(*out, Entry{Key: key, Value: fv, Secrecy: s})
		}
	}
}

// isSection reports whether t is a section of keys rather than a value.
func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Time]()
}

// holds reports whether a value of type t can be declared s.
func holds(s Secrecy, t reflect.Type) bool {
	stringy := func(t reflect.Type) bool {
		return t.Kind() == reflect.String || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
	}
	switch s {
	case Whole:
		return stringy(t) || t.Kind() == reflect.Map && stringy(t.Elem())
	case Carried:
		return stringy(t)
	case EnvNamed:
		return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String
	}
	return true
}

// Secrets are the secrets e declares, none empty. A credential a URL
// escapes is given both as written and as meant, since a log line may
// quote either. getenv reads the variables an EnvNamed map names; nil
// reads none.
func (e Entry) Secrets(getenv func(string) string) []string {
	var out []string
	switch e.Secrecy {
	case Whole:
		out = stringsOf(e.Value)
	case Carried:
		items := stringsOf(e.Value)
		for i, spans := range carried(items) {
			for _, sp := range spans {
				out = append(out, sp.forms(items[i])...)
			}
		}
	case EnvNamed:
		if getenv != nil {
			for _, k := range e.Value.MapKeys() {
				out = append(out, getenv(k.String()))
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// Secrets are the secrets every key of section declares (Entries).
func Secrets(section any, getenv func(string) string) []string {
	var out []string
	for _, e := range Entries("", section) {
		out = append(out, e.Secrets(getenv)...)
	}
	return out
}

// stringsOf are the strings of v: itself, a list's items, a map's
// values.
func stringsOf(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		return []string{v.String()}
	case reflect.Slice:
		out := make([]string, 0, v.Len())
		for i := range v.Len() {
			out = append(out, stringsOf(v.Index(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, stringsOf(v.MapIndex(k))...)
		}
		return out
	}
	return nil
}

// Mask is s, a value declared Carried, with each credential it carries
// replaced by mask: "postgres://loadout:(set)@db/x".
func Mask(s, mask string) string { return MaskArgs([]string{s}, mask)[0] }

// MaskArgs is Mask for a list of arguments, where a flag named like a
// credential makes the next argument one.
func MaskArgs(args []string, mask string) []string {
	out := slices.Clone(args)
	for i, spans := range carried(args) {
		// From the end, so the earlier spans stay where they are.
		for _, sp := range slices.Backward(spans) {
			out[i] = out[i][:sp.from] + mask + out[i][sp.to:]
		}
	}
	return out
}
