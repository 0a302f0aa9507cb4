package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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

// EffectOf is a call's effect: Definition.EffectOf when the tool has one
// (a tool whose actions differ), else Definition.Effect, raised to
// EffectMutate for a tool that is not ReadOnly.
func EffectOf(d Definition, args json.RawMessage) Effect {
	e := d.Effect
	if d.EffectFor != nil {
		e = d.EffectFor(args)
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

// Policy says which calls wait for the person's approval.
type Policy struct {
	// Level is ConfirmDestructive (the default when empty),
	// ConfirmMutating or ConfirmNone.
	Level string
	// Tools overrides the level per tool: ConfirmAlways or ConfirmNever.
	Tools map[string]string
}

// Needs reports whether a call of d with args must be approved first.
func (p Policy) Needs(d Definition, args json.RawMessage) bool {
	switch p.Tools[d.Name] {
	case ConfirmAlways:
		return true
	case ConfirmNever:
		return false
	}
	// Before the effect, which may decode the arguments: this runs on
	// every call.
	if p.Level == ConfirmNone {
		return false
	}
	e := EffectOf(d, args)
	if p.Level == ConfirmMutating {
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

// CodeNeedsConfirmation answers a call that needs the person's approval
// in a turn nobody is there to give it (a scheduled task).
const CodeNeedsConfirmation = "needs_confirmation"

// Summary is the plain sentence a person approves: d.Summarize when the
// tool has one, else the tool's name and its arguments, each value cut
// short. It is built from the arguments only, never from the model's
// prose around the call.
func Summary(d Definition, args json.RawMessage) string {
	if d.Summarize != nil {
		if s := strings.TrimSpace(d.Summarize(args)); s != "" {
			return s
		}
	}
	var m map[string]any
	_ = json.Unmarshal(args, &m)
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
		v, _ := json.Marshal(m[k])
		s := string(v)
		if str, ok := m[k].(string); ok {
			s = "'" + str + "'"
		}
		fmt.Fprintf(&b, "%s %s", k, Shorten(s, 80))
	}
	return b.String()
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

// Gate decides, after a call's arguments are checked and before it runs,
// whether it runs now. held=true means it does not, and res is its result
// (a call waiting for approval, or refused). The engine sets one.
type Gate func(ctx context.Context, d Definition, c Call, args json.RawMessage) (res Result, held bool)

// StatusPending marks the result of a call held for the person's approval;
// the engine ends the turn with the question and records the call's
// result once the person answers.
const StatusPending = "pending"
