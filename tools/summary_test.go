package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The property behind the default summary, which every tool without a
// Summarize of its own shows (MCP and manifest tools, settings): for generated arguments (long prose holding addresses and
// URLs, lists of addresses, ids, URLs, nested objects), every address and
// every id or URL the call carries is named in the summary or counted in one of
// its "and N others".
func TestDefaultSummaryHidesNoAddressOrID(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 5))
	word := func() string {
		const letters = "bcdfghjkmnpqrstvwxz"
		b := []byte("v")
		for range 7 {
			b = append(b, letters[rng.IntN(len(letters))])
		}
		return string(b)
	}
	prose := func(addrs []string) string {
		var parts []string
		for range 5 + rng.IntN(30) {
			parts = append(parts, "some words of text")
		}
		for _, a := range addrs {
			parts = slices.Insert(parts, rng.IntN(len(parts)+1), a)
		}
		return strings.Join(parts, " ")
	}
	def := Definition{Name: "mcp_thing", Description: "An MCP tool."}
	others := regexp.MustCompile(`and (\d+) others`)
	for i := range 300 {
		var targets []string // must be named or counted
		args := map[string]any{}
		for k := range 1 + rng.IntN(5) {
			key := fmt.Sprintf("p%d", k)
			switch rng.IntN(5) {
			case 0: // an id or a URL
				v := word()
				if rng.IntN(2) == 0 {
					v = "https://" + word() + ".example.com/" + strings.Repeat(word()+"/", rng.IntN(12))
				}
				args[key], targets = v, append(targets, v)
			case 1: // prose holding addresses and URLs
				var addrs []string
				for range rng.IntN(6) {
					a := word() + "@example.org"
					if rng.IntN(2) == 0 {
						a = "https://" + word() + ".example.com/c?d=" + word()
					}
					addrs = append(addrs, a)
				}
				args[key], targets = prose(addrs), append(targets, addrs...)
			case 2: // a list of addresses
				var l []any
				for range 1 + rng.IntN(9) {
					a := word() + "@example.org"
					l, targets = append(l, a), append(targets, a)
				}
				args[key] = l
			case 3: // a nested object
				a := word() + "@example.org"
				args[key], targets = map[string]any{"note": prose(nil), "to": []string{a}}, append(targets, a)
			default:
				args[key] = rng.IntN(1e6)
			}
		}
		b, _ := json.Marshal(args)
		s := Summary(context.Background(), def, Input{Value: json.RawMessage(b), JSON: string(b)})
		missing := 0
		for _, v := range targets {
			if !strings.Contains(s, v) {
				missing++
			}
		}
		counted := 0
		for _, m := range others.FindAllStringSubmatch(s, -1) {
			n, _ := strconv.Atoi(m[1])
			counted += n
		}
		if missing > counted {
			t.Fatalf("case %d: %d of what the call carries is neither named nor counted in %q\narguments: %s", i, missing-counted, s, b)
		}
	}
}

// The property behind Whole, which shows a memory to keep and a task's
// prompt to run unattended: a text up to WholeChars is shown whole; past
// it, every URL, host, address and number of the rest is named, wherever
// the cut falls (in a word, in a URL, between two).
func TestWholeHidesNothingPastItsCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	word := func() string {
		const letters = "bcdfghjkmnpqrstvwxz"
		b := []byte("v")
		for range 3 + rng.IntN(6) {
			b = append(b, letters[rng.IntN(len(letters))])
		}
		return string(b)
	}
	notables := []func() string{
		func() string { return "https://collect." + word() + ".example/c?d=" },
		func() string { return word() + ".evil.example" },
		func() string { return word() + "@example.org" },
		func() string { return strconv.Itoa(rng.IntN(1e6)) },
		func() string { return "XX00" + strings.ToUpper(word()) },
	}
	for i := range 400 {
		var words, named []string
		for range rng.IntN(700) {
			words = append(words, word())
		}
		for range rng.IntN(8) {
			n := notables[rng.IntN(len(notables))]()
			words = slices.Insert(words, rng.IntN(len(words)+1), n)
			named = append(named, n)
		}
		text := strings.Join(words, " ")
		s := Whole(text)
		if len([]rune(text)) <= WholeChars {
			if s != "'"+text+"'" {
				t.Fatalf("case %d: a text of %d characters is not shown whole: %q", i, len([]rune(text)), s)
			}
			continue
		}
		if !strings.Contains(s, fmt.Sprintf("and %d more characters", len([]rune(text))-WholeChars)) {
			t.Fatalf("case %d: the cut is not counted: %q", i, s[len(s)-200:])
		}
		for _, n := range named {
			if !strings.Contains(s, n) {
				t.Fatalf("case %d: %q is not named in %q", i, n, s)
			}
		}
	}
}
