package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// Effect is what a call does to the world, which decides whether the
// person must approve it first.
type Effect int

// Effects, from harmless to grave.
const (
	// EffectRead changes nothing outside loadout.
	EffectRead Effect = iota
	// EffectMutate changes the person's own data (a label, a draft, a
	// file in the workspace).
	EffectMutate
	// EffectDestructive sends something to other people, deletes,
	// shares, changes permissions or spends money.
	EffectDestructive
)

func (e Effect) String() string {
	switch e {
	case EffectRead:
		return "read-only"
	case EffectMutate:
		return "mutating"
	}
	return "destructive"
}

// EffectOf is a call's effect: Definition.EffectFor of the call's
// decoded input when the tool has one (a tool whose actions differ), else
// Definition.Effect, raised to EffectMutate for a tool that is not
// ReadOnly. in nil asks for the tool's effect in general.
func EffectOf(ctx context.Context, d Definition, in any) Effect {
	e := d.Effect
	if d.EffectFor != nil {
		e = d.EffectFor(ctx, in)
	}
	if e == EffectRead && !d.ReadOnly && d.EffectFor == nil {
		e = EffectMutate
	}
	return e
}

// Confirmation levels of tools.confirm.
const (
	ConfirmDestructive = "destructive"
	ConfirmMutating    = "mutating"
	ConfirmNone        = "none"
)

// Per-tool overrides of tools.confirm_tools.
const (
	ConfirmAlways = "always"
	ConfirmNever  = "never"
)

// Levels of tools.confirm_after_untrusted besides ConfirmMutating and
// ConfirmDestructive.
const ConfirmOff = "off"

// Policy says which calls wait for the person's approval.
type Policy struct {
	// Level is ConfirmDestructive (the default when empty),
	// ConfirmMutating or ConfirmNone.
	Level string
	// Tools overrides the level per tool: ConfirmAlways or ConfirmNever.
	Tools map[string]string
	// AfterUntrusted is the level that holds once a turn has read
	// untrusted content (Caller.Tainted), whatever Level and Tools say:
	// ConfirmMutating (the default when empty), ConfirmDestructive or
	// ConfirmOff.
	AfterUntrusted string
}

// Needs reports whether a call of d with the decoded input in must be
// approved first. tainted is whether the turn has read untrusted content.
func (p Policy) Needs(ctx context.Context, d Definition, in any, tainted bool) bool {
	after := cmp.Or(p.AfterUntrusted, ConfirmMutating)
	override := p.Tools[d.Name]
	if override == ConfirmAlways {
		return true
	}
	// The levels that apply, decided before the effect, which may ask a
	// service: this runs on every call.
	var levels []string
	if tainted && after != ConfirmOff {
		levels = append(levels, after)
	}
	if override != ConfirmNever && p.Level != ConfirmNone {
		levels = append(levels, p.Level)
	}
	if len(levels) == 0 {
		return false
	}
	e := EffectOf(ctx, d, in)
	return slices.ContainsFunc(levels, func(l string) bool { return reaches(e, l) })
}

// reaches reports whether effect e is grave enough for level.
func reaches(e Effect, level string) bool {
	if level == ConfirmMutating {
		return e >= EffectMutate
	}
	return e >= EffectDestructive
}

// Check reports a bad level or override, naming the key.
func (p Policy) Check() error {
	switch p.Level {
	case "", ConfirmDestructive, ConfirmMutating, ConfirmNone:
	default:
		return fmt.Errorf("tools.confirm: must be destructive, mutating or none, got %q", p.Level)
	}
	switch p.AfterUntrusted {
	case "", ConfirmDestructive, ConfirmMutating, ConfirmOff:
	default:
		return fmt.Errorf("tools.confirm_after_untrusted: must be mutating, destructive or off, got %q", p.AfterUntrusted)
	}
	names := make([]string, 0, len(p.Tools))
	for n := range p.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if v := p.Tools[n]; v != ConfirmAlways && v != ConfirmNever {
			return fmt.Errorf("tools.confirm_tools.%s: must be always or never, got %q", n, v)
		}
	}
	return nil
}

// Summary is the plain sentence a person approves: d.Summarize when the
// tool has one, else the tool's name and its arguments, each value cut
// short. It is built from the call's Input only (the value that runs),
// never from the model's prose around the call.
func Summary(ctx context.Context, d Definition, in Input) string {
	if d.Summarize != nil {
		if s := strings.TrimSpace(d.Summarize(ctx, in.Value)); s != "" {
			return s
		}
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(in.JSON))
	dec.UseNumber() // numbers as the call carries them, not rounded
	_ = dec.Decode(&m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s", d.Name)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" with ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", k, summaryValue(m[k]))
	}
	return b.String()
}

// addressPattern finds email addresses in an argument.
var addressPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+`) })

// urlPattern finds URLs in an argument: a scheme, "://" and what follows
// up to a space or a quote.
var urlPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>]+`) })

// summaryValue is one argument of a default summary. Prose is cut short,
// but never what says whom or what a call reaches: a word without spaces
// (an id, an address, a URL) is kept whole up to 200 characters, a list
// names its first five items and counts the rest, and the addresses and
// URLs a cut hides are listed after it.
func summaryValue(v any) string {
	var full, short string
	switch v := v.(type) {
	case string:
		full = v
		n := 80
		if !strings.ContainsFunc(strings.TrimSpace(v), unicode.IsSpace) {
			n = 200
		}
		short = "'" + Shorten(v, n) + "'"
	case []any:
		items := make([]string, len(v))
		for i, x := range v {
			items[i] = summaryValue(x)
		}
		return Names(items, 5)
	default:
		b, _ := json.Marshal(v)
		full = string(b)
		short = Shorten(full, 80)
	}
	var with []string
	for _, l := range []struct {
		what    string
		pattern *regexp.Regexp
	}{{"addresses", addressPattern()}, {"URLs", urlPattern()}} {
		var hidden []string
		for _, a := range l.pattern.FindAllString(full, -1) {
			if !strings.Contains(short, a) && !slices.Contains(hidden, a) {
				hidden = append(hidden, a)
			}
		}
		if len(hidden) > 0 {
			with = append(with, "the "+l.what+" "+Names(hidden, 3))
		}
	}
	if len(with) > 0 {
		short += " (with " + strings.Join(with, " and ") + ")"
	}
	return short
}

// WholeChars is how much of a text Whole shows before it cuts.
const WholeChars = 2000

// Whole shows a text a person approves to keep or to have run unattended
// (a memory, a scheduled task's prompt) in quotes, whole, on one line,
// up to WholeChars characters. A longer one is cut there and followed by
// "and N more characters", with every URL, host, address and number
// past the cut listed, so that nothing the rest of it reaches or names
// is hidden.
func Whole(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	r := []rune(text)
	if len(r) <= WholeChars {
		return "'" + text + "'"
	}
	// The word the cut falls in counts as past it.
	cut := WholeChars
	for cut > 0 && r[cut-1] != ' ' {
		cut--
	}
	var past []string
	for w := range strings.FieldsSeq(string(r[cut:])) {
		w = strings.TrimRight(strings.TrimLeft(w, `"'([<{`), `"')]>},;:.!?`)
		if notable(w) && !slices.Contains(past, w) {
			past = append(past, w)
		}
	}
	s := fmt.Sprintf("'%s…' and %d more characters", string(r[:WholeChars]), len(r)-WholeChars)
	if len(past) > 0 {
		s += ", which name " + strings.Join(past, ", ")
	}
	return s
}

// notable reports whether a word of a text says where or whom something
// reaches, or carries a figure: a URL, an address, a host, a number or
// a code with digits (an IBAN, a PIN).
func notable(w string) bool {
	if strings.Contains(w, "://") || strings.Contains(w, "@") || strings.ContainsFunc(w, unicode.IsDigit) {
		return true
	}
	// A host: labels joined by dots, the last one letters.
	labels := strings.Split(w, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || strings.ContainsFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' }) {
			return false
		}
	}
	return !strings.ContainsFunc(labels[len(labels)-1], func(r rune) bool { return !unicode.IsLetter(r) })
}

// Shorten cuts s to at most n runes, marking the cut with "…", and puts
// it on one line.
func Shorten(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}

// Lines counts the lines of a text the way a person would: "" is 0.
func Lines(s string) int {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// Gate decides, after a call's arguments are checked and decoded and
// before it runs, whether it runs now. held=true means it does not, and
// res is its result (a call waiting for approval, or refused). ran, when
// not nil, is called with the result of a call let through once it ran
// (the audit trail records a call a rule allowed with its outcome). The
// engine sets one.
type Gate func(ctx context.Context, d Definition, c Call, in Input) (res Result, held bool, ran func(Result))

// StatusPending marks the result of a call held for the person's approval;
// the engine ends the turn with the question and records the call's
// result once the person answers.
const StatusPending = "pending"

// Recipients names everyone a message goes to, for a summary: each of
// To, Cc and Bcc in full up to three addresses, then "and N others", Cc
// and Bcc by their own names, so no recipient can sit unseen behind a
// cut: "ana@example.com, cc bob@example.com, bcc eve@example.com".
func Recipients(to, cc, bcc []string) string {
	var parts []string
	for _, l := range []struct {
		label string
		addrs []string
	}{{"", to}, {"cc ", cc}, {"bcc ", bcc}} {
		if len(l.addrs) == 0 {
			continue
		}
		parts = append(parts, l.label+Names(l.addrs, 3))
	}
	if len(parts) == 0 {
		return "nobody"
	}
	return strings.Join(parts, ", ")
}

// Names lists names in full up to most of them, then "and N others".
func Names(names []string, most int) string {
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d others", strings.Join(names[:most], ", "), len(names)-most)
}

// acting reports whether w is a word a tool that sends to others,
// deletes or shares says it does.
func acting(w string) bool {
	switch w {
	case "send", "delete", "share", "forward", "trash":
		return true
	}
	return false
}

// ActingWord is the word by which d says it sends, deletes, shares,
// forwards or trashes: one of its name's words, or its description's
// first (its verb, "Sends" as "send"). "" when it says none. The
// registry refuses such a tool declared read-only, so a new group cannot
// slip one past the approval policy.
func ActingWord(d Definition) string {
	for w := range strings.SplitSeq(d.Name, "_") {
		if acting(w) {
			return w
		}
	}
	verb, _, _ := strings.Cut(strings.TrimSpace(d.Description), " ")
	verb = strings.TrimSuffix(strings.ToLower(strings.Trim(verb, ".,:;")), "s")
	if acting(verb) {
		return verb
	}
	return ""
}
