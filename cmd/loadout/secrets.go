package main

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"loadout/config"
	"loadout/logs"
	"loadout/tools"
	"loadout/ui"
)

// entries are every key of c and of each channel's section (under the
// channel's name), each with what it declares secret: the `secret` tags
// of the sections' types (config.Secrecy), the one declaration of a
// secret that the logger and the console read.
func (c Config) entries() []config.Entry {
	out := config.Entries("", c)
	for _, k := range channelKinds() {
		out = append(out, config.Entries(k.Name(), c.section(k))...)
	}
	return out
}

// secrets are every secret the configuration declares: the values of
// its secret keys, the channels' included, every value of the maps that
// hand an environment or headers to another program, the credentials
// its URLs, DSN and MCP servers' arguments carry, and the values of the
// variables tools.custom_secrets names (read from the process's
// environment, as the tools read them). None reaches a log line or the
// console.
func (c Config) secrets() []string {
	var out []string
	for _, e := range c.entries() {
		out = append(out, e.Secrets(os.Getenv)...)
	}
	return out
}

// masked stands on the console for a credential a URL, a DSN or a
// command line carries.
const masked = "(set)"

// settings is the effective configuration, key by key, for the console:
// a secret shown as set or unset, never its value; a value that carries
// credentials (config.Carried) with each of them as (set); a map by its
// names only; and any other value the logger would redact (one holding
// a declared secret) as set.
func (c Config) settings() []ui.Setting {
	redact := logs.NewRedactor(c.secrets(), channelShapes())
	var out []ui.Setting
	for _, e := range c.entries() {
		out = append(out, setting(e, redact))
	}
	return out
}

// setting is one entry as the console shows it.
func setting(e config.Entry, redact *logs.Redactor) ui.Setting {
	v := e.Value
	switch {
	case v.Kind() == reflect.Map:
		// Maps hold environment variables, headers and the secrets
		// tools may use: their names only.
		keys := make([]string, 0, v.Len())
		for _, mk := range v.MapKeys() {
			keys = append(keys, fmt.Sprint(mk.Interface()))
		}
		slices.Sort(keys)
		s := ui.Setting{Key: e.Key, Value: "unset", Secret: true}
		if len(keys) > 0 {
			s.Value = "set"
			s.Key += " (" + strings.Join(keys, ", ") + ")"
		}
		return s
	case e.Secrecy == config.Whole:
		return ui.Setting{Key: e.Key, Value: map[bool]string{true: "set", false: "unset"}[v.Len() > 0], Secret: true}
	case e.Secrecy == config.Carried:
		s := ui.Setting{Key: e.Key, Value: show(v)}
		switch x := v.Interface().(type) {
		case string:
			s.Value = config.Mask(x, masked)
		case []string:
			s.Value = fmt.Sprint(config.MaskArgs(x, masked))
		}
		s.Value = redact.Text(s.Value)
		return s
	}
	s := ui.Setting{Key: e.Key, Value: show(v)}
	if redact.Text(s.Value) != s.Value {
		s.Secret, s.Value = true, "set"
	}
	return s
}

// show is a setting's value as text.
func show(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case config.Duration:
		return x.Std().String()
	case time.Duration:
		return x.String()
	case tools.Admins:
		return fmt.Sprint(x)
	}
	switch v.Kind() {
	case reflect.Func, reflect.Chan, reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		if v.Kind() == reflect.Pointer {
			return show(v.Elem())
		}
		return "(set in code)"
	}
	return fmt.Sprint(v.Interface())
}
