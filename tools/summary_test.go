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
// Summarize of its own shows (MCP and manifest tools, memory, schedules,
// settings): for generated arguments (long prose holding addresses,
// lists of addresses, ids, URLs, nested objects), every address and every
// id or URL the call carries is named in the summary or counted in one of
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
			case 1: // prose holding addresses
				var addrs []string
				for range rng.IntN(6) {
					addrs = append(addrs, word()+"@example.org")
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
