package main

import (
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"loadout/chat/chattest"
	"loadout/config"
	"loadout/settings"
)

// Every channel of the list declares its secrets (the secret tags of its
// Config) and token shapes, and the logger serve makes takes them out: a
// section's every string whose key names a credential (token, secret,
// password, key) must be among the declared secrets, and neither such a
// value nor a string of a declared shape, alone or inside a longer text,
// reaches a log line. A channel added to the list without its secrets
// fails here (and in TestEveryCredentialOfTheConfigIsDeclared).
func TestEveryChannelsSecretsAndShapesAreRedacted(t *testing.T) {
	credential := regexp.MustCompile(`token|secret|password|(^|_)key$`)
	for _, k := range settings.ChannelKinds() {
		t.Run(k.Name(), func(t *testing.T) {
			// Every string of the section gets a value of its own.
			section := reflect.New(k.ConfigType()).Elem()
			var credentials []string
			for i, f := range reflect.VisibleFields(k.ConfigType()) {
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if f.Type.Kind() != reflect.String || name == "" || name == "-" || len(f.Index) > 1 {
					continue
				}
				v := fmt.Sprintf("Value%02dOf%s", i, strings.ReplaceAll(name, "_", ""))
				section.FieldByIndex(f.Index).SetString(v)
				if credential.MatchString(name) {
					credentials = append(credentials, v)
				}
			}
			declared := config.Secrets(section.Interface(), nil)
			for _, v := range credentials {
				if !slices.Contains(declared, v) {
					t.Errorf("%s: a credential's key (%s) is not among the declared secrets", k.Name(), v)
				}
			}
			cfg, err := settings.Parse(nil, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Channels[k.Name()] = section.Interface()
			var buf chattest.LogBuffer
			log := cfg.Logger(&buf)
			var leaks []string
			for _, v := range declared {
				if v != "" {
					leaks = append(leaks, v)
				}
			}
			// A channel with no credentials of its own (the browser
			// chat: the web side's sessions hold them) has none to shape.
			if len(k.Shapes()) == 0 && len(credentials) > 0 {
				t.Errorf("%s declares no token shape", k.Name())
			}
			for _, shape := range k.Shapes() {
				leaks = append(leaks, sampleOf(t, shape))
			}
			for _, v := range leaks {
				log.Error("calling https://api.example/"+v+"/send failed", "token", v, "err", fmt.Errorf("status 401 for %s", v))
			}
			for _, v := range leaks {
				if strings.Contains(buf.String(), v) {
					t.Errorf("%s: %q reached the log:\n%s", k.Name(), v, buf.String())
				}
			}
		})
	}
}

// sampleOf is a string the regular expression re matches in full.
func sampleOf(t *testing.T, re string) string {
	t.Helper()
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		t.Fatalf("shape %q: %v", re, err)
	}
	var b strings.Builder
	var walk func(r *syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpLiteral:
			b.WriteString(string(r.Rune))
		case syntax.OpCharClass:
			// A letter or digit of the class where it has one, so the
			// sample reads like a token.
			pick := r.Rune[0]
			for i := 0; i+1 < len(r.Rune); i += 2 {
				if lo, hi := r.Rune[i], r.Rune[i+1]; lo <= 'a' && 'a' <= hi {
					pick = 'a'
				}
			}
			b.WriteRune(pick)
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('x')
		case syntax.OpCapture:
			walk(r.Sub[0])
		case syntax.OpConcat:
			for _, s := range r.Sub {
				walk(s)
			}
		case syntax.OpAlternate:
			walk(r.Sub[0])
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
			n := max(r.Min, 1)
			if r.Op == syntax.OpQuest {
				n = 1
			}
			if r.Op == syntax.OpRepeat && r.Max >= 0 {
				n = min(max(r.Min, 1), r.Max)
			}
			for range n {
				walk(r.Sub[0])
			}
		}
	}
	walk(parsed)
	s := b.String()
	if !regexp.MustCompile(`^(?:` + re + `)$`).MatchString(s) {
		t.Fatalf("no sample of shape %q (made %q)", re, s)
	}
	return s
}
