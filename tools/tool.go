// Package tools defines what the model can call: tools, their groups, the
// registry that holds them, the per-session catalog, and the executor that
// runs a turn's calls with timeouts, schema checks and structured errors.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DefaultTimeout bounds a tool call whose Definition sets no Timeout.
const DefaultTimeout = 30 * time.Second

// namePattern is the rule for tool and group names, as validName checks
// it.
const namePattern = `^[a-z][a-z0-9_]{0,63}$`

// validName reports whether name matches namePattern. It is written out
// because the compiled pattern (63 nested optional steps) cost most of
// the package's start-up time.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// Definition describes a tool to the model and to the executor.
type Definition struct {
	// Name is unique across the registry and matches ^[a-z][a-z0-9_]{0,63}$.
	Name string
	// Description is what the model routes on; one or two sentences.
	Description string
	// Parameters is a JSON Schema object. Nil means "no parameters".
	Parameters json.RawMessage
	// ReadOnly is true when the tool changes nothing outside loadout.
	ReadOnly bool
	// Effect is what a call does (see EffectOf): a tool that is not
	// ReadOnly is at least EffectMutate; one that sends to other people,
	// deletes or shares says EffectDestructive. EffectFor, when set,
	// decides per call instead (a tool whose actions differ).
	Effect    Effect
	EffectFor func(args json.RawMessage) Effect
	// Summarize, when set, says in one plain sentence what a call will do
	// ("Send an email to ana@example.com, subject 'Invoice', 3 lines"),
	// for the person who approves it; see Summary.
	Summarize func(args json.RawMessage) string
	// WritesSettings is true when a successful call may change the chat's
	// Settings; the engine then reads them again before the next round.
	WritesSettings bool
	// Timeout bounds one call; zero means DefaultTimeout.
	Timeout time.Duration
	// Group is the group the tool belongs to; empty for a core tool. The
	// registry sets it from the group the tool is added with.
	Group string
}

// Func runs one call. args is the call's JSON object, already checked
// against the definition's schema. The returned value is sent to the model:
// a string as is, anything else as JSON. Return an *Error for anything the
// model can correct; other errors become code "internal".
type Func func(ctx context.Context, args json.RawMessage) (any, error)

// Tool is a definition and the function that runs it.
type Tool struct {
	Definition
	Run Func
}

// Group describes a set of tools that the model loads together.
type Group struct {
	// Name is the identifier the model passes to load_tool_group.
	Name string
	// DisplayName is the human name, e.g. "Google Gmail".
	DisplayName string
	// Description is the one line shown in the system prompt listing.
	Description string
	// Admit, when set, says whether the caller in ctx may load the group;
	// load_tool_group refuses others with CodePermission.
	Admit func(ctx context.Context) bool
	// Prepare, when set, runs before load_tool_group reads the group's
	// tools: a group whose tools are not known yet (an MCP server that
	// was down at start) lists them then and replaces itself in the
	// registry. An error is the load's result.
	Prepare func(ctx context.Context) error
}

// New builds a tool whose arguments decode into In. The JSON Schema is
// derived from In (see Schema), so schema and code cannot drift.
func New[In any](def Definition, run func(ctx context.Context, in In) (any, error)) Tool {
	var zero In
	if def.Parameters == nil {
		def.Parameters = Schema(zero)
	}
	return Tool{
		Definition: def,
		Run: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in In
			if len(args) > 0 {
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, &Error{
						Code:       CodeInvalidArgument,
						Message:    fmt.Sprintf("arguments do not match the schema of %s: %v", def.Name, err),
						Suggestion: "Check the parameter types against the tool's schema and call it again.",
					}
				}
			}
			return run(ctx, in)
		},
	}
}

// Caller identifies who a call acts for. The engine puts it in the context
// of every tool call; tools that act per chat or per person read it.
type Caller struct {
	// ChatKey is the conversation, e.g. "telegram:123" or "console:local".
	ChatKey string
	// UserKey is the person whose message started the turn, e.g.
	// "telegram:42" or "slack:T1:U2".
	UserKey string
	// SessionID is the chat's open session.
	SessionID int64
	// Disabled is the set of tools switched off for this chat.
	Disabled map[string]bool
	// Loaded are the groups loaded in the session, in load order.
	Loaded []string
	// Unattended is set for a turn nobody is waiting on (a scheduled
	// task): a call that needs approval is refused, not asked.
	Unattended bool
	// Approved is the id of the call the person approved: that call runs
	// without asking again.
	Approved string
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller in ctx, or the zero Caller.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// SchemaTokens is what defs cost in a request, counted by count on each
// definition's SchemaText.
func SchemaTokens(defs []Definition, count func(string) int) int {
	n := 0
	for _, d := range defs {
		n += count(SchemaText(d))
	}
	return n
}

// SchemaText is the JSON a definition costs in a request: the OpenAI
// function-tool object. Token counts of tool schemas are taken on it.
func SchemaText(d Definition) string {
	params := d.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	b, _ := json.Marshal(map[string]any{
		"type": "function",
		"function": map[string]any{
			"name":        d.Name,
			"description": d.Description,
			"parameters":  params,
		},
	})
	return string(b)
}
