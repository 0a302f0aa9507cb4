package ui

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"loadout/config"
	"loadout/logs"
	"loadout/tools"
)

// masked stands on the console for a credential a URL, a DSN or a
// command line carries.
const masked = "(set)"

// SettingOf is one entry of the effective configuration as the console
// shows it: a secret as set or unset, never its value; a value that
// carries credentials (config.Carried) with each of them as (set); a map
// by its names only; and any other value redact would change (one
// holding a declared secret) as set.
func SettingOf(e config.Entry, redact *logs.Redactor) Setting {
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
		s := Setting{Key: e.Key, Value: "unset", Secret: true}
		if len(keys) > 0 {
			s.Value = "set"
			s.Key += " (" + strings.Join(keys, ", ") + ")"
		}
		return s
	case e.Secrecy == config.Whole:
		return Setting{Key: e.Key, Value: map[bool]string{true: "set", false: "unset"}[v.Len() > 0], Secret: true}
	case e.Secrecy == config.Carried:
		s := Setting{Key: e.Key, Value: show(v)}
		switch x := v.Interface().(type) {
		case string:
			s.Value = config.Mask(x, masked)
		case []string:
			s.Value = fmt.Sprint(config.MaskArgs(x, masked))
		}
		s.Value = redact.Text(s.Value)
		return s
	}
	s := Setting{Key: e.Key, Value: show(v)}
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
