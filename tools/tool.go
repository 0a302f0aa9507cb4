// Package tools defines what the model can call: tools, their groups, the
// registry that holds them, the per-session catalog, and the executor that
// runs a turn's calls with timeouts, schema checks and structured errors.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
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
	// decides per call instead (a tool whose actions differ); it gets the
	// call's decoded input, the value Run gets (see By).
	Effect    Effect
	EffectFor func(ctx context.Context, in any) Effect
	// Summarize, when set, says in one plain sentence what a call will do
	// ("Send an email to ana@example.com, subject 'Invoice', 3 lines"),
	// for the person who approves it; see Summary. It gets the call's
	// decoded input, the value that runs once approved (see By).
	Summarize func(ctx context.Context, in any) string
	// Untrusted is true when what the tool returns is content from
	// outside the person's own words (a web page, a mail or document
	// body, a PDF, an HTTP or MCP result, a file someone sent): once a
	// turn has read it, the turn's mutating and destructive calls wait
	// for the person's approval (Policy.AfterUntrusted). UntrustedFor,
	// when set, decides per call instead (a tool whose actions differ).
	Untrusted    bool
	UntrustedFor func(ctx context.Context, in any) bool
	// Examples are requests a person makes that this tool does ("who
	// emailed me about the invoice"): find_tools indexes them; they are
	// never sent to the model.
	Examples []string
	// Catchall is true for the tool that answers what no tool names (web
	// search: "what's the capital of Australia"): find_tools offers it
	// for a request as much as the request's words are unknown to every
	// tool.
	Catchall bool
	// Personal is true when what the tool returns belongs to the person
	// who called it (their memories, their Google data): in a chat shared
	// with others, the result is shown to the model on that person's
	// turns only; on anyone else's it is a placeholder. PersonalFor,
	// when set, decides per call instead (a PDF read from the person's
	// Drive, but not one from the chat's files).
	Personal    bool
	PersonalFor func(ctx context.Context, in any) bool
	// Reaches, when set, adds to what a call reaches what only the tool
	// can tell at run time: a reply's recipients, read from the message
	// it answers; a draft's; the attendees a change mails. It gets the
	// call's decoded input (see By). What it cannot resolve it says in
	// Reach.Unknown, in words a person reads with the question ("who the
	// reply goes to could not be read"), and no scoped rule covers the
	// call. What a typed input's arguments reach is declared by reach
	// tags on its fields (see New); see ReachOf.
	Reaches func(ctx context.Context, in any) Reach
	// reach reads the reach tags of a typed input (set by New); nil for
	// an open tool, whose arguments ReachOfJSON reads.
	reach func(in any) Reach
	// WritesSettings is true when a successful call may change the chat's
	// Settings; the engine then reads them again before the next round.
	WritesSettings bool
	// Timeout bounds one call; zero means DefaultTimeout.
	Timeout time.Duration
	// Group is the group the tool belongs to; empty for a core tool. The
	// registry sets it from the group the tool is added with.
	Group string
}

// Func runs one call. in is the call's input, decoded once (see
// Tool.Decode): the typed input of a tool made with New, the checked JSON
// object (json.RawMessage) of one made with Raw. The returned value is
// sent to the model: a string as is, anything else as JSON. Return an
// *Error for anything the model can correct; other errors become code
// "internal".
type Func func(ctx context.Context, in any) (any, error)

// Tool is a definition and the function that runs it.
type Tool struct {
	Definition
	// Decode turns the call's arguments, checked against the schema,
	// into the input Run, EffectFor and Summarize get. Nil passes the
	// checked JSON object on as json.RawMessage. New sets it.
	Decode func(args json.RawMessage) (any, error)
	// Open lets through properties the schema does not name, as JSON
	// Schema allows by default (an MCP server's schema); otherwise they
	// are refused unless the schema says additionalProperties: true.
	Open bool
	Run  Func
}

// Call checks args against t's schema, decodes them once and runs t,
// without the executor's timeout, gate or error handling: for tests and
// callers that hold one tool.
func (t Tool) Call(ctx context.Context, args json.RawMessage) (any, error) {
	s, err := compileSchema(t.Parameters)
	if err != nil {
		return nil, err
	}
	in, te := decodeInput(t, s, string(args))
	if te != nil {
		return nil, te
	}
	return t.Run(ctx, in.Value)
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
	// Untrusted marks a group whose tools' names and descriptions are
	// outside text (an MCP server's): they reach the model in every
	// request once loaded, so a call that loads the group taints its
	// turn as reading untrusted content would.
	Untrusted bool
}

// New builds a tool whose arguments decode into In, strictly (see
// Strict). The JSON Schema is derived from In (see Schema), so schema and
// code cannot drift, and so is what a call reaches: the fields tagged
// reach:"recipients", "url", "host", "path" or "folder" (see ReachOf).
// New panics on a field whose name says it reaches someone or somewhere
// ("to", "url", "path"…) but has no reach tag: reach:"-" says it reaches
// nothing.
func New[In any](def Definition, run func(ctx context.Context, in In) (any, error)) Tool {
	var zero In
	if def.Parameters == nil {
		def.Parameters = Schema(zero)
	}
	if t := reflect.TypeOf(zero); t != nil && t.Kind() == reflect.Struct {
		fields := reachFields(t)
		def.reach = func(v any) Reach { return reachOfValue(fields, reflect.ValueOf(v)) }
	}
	return Tool{
		Definition: def,
		Decode: func(args json.RawMessage) (any, error) {
			var in In
			if err := Strict(args, &in); err != nil {
				return nil, err
			}
			return in, nil
		},
		Run: func(ctx context.Context, v any) (any, error) {
			in, ok := v.(In)
			if !ok {
				return nil, fmt.Errorf("tool %s: input of type %T, want %T", def.Name, v, zero)
			}
			return run(ctx, in)
		},
	}
}

// Raw builds a tool that takes its arguments as the checked JSON object
// (json.RawMessage), passed on as the model wrote them, spacing aside:
// an MCP tool, a manifest's HTTP call.
func Raw(def Definition, run func(ctx context.Context, args json.RawMessage) (any, error)) Tool {
	return Tool{Definition: def, Run: func(ctx context.Context, v any) (any, error) {
		args, _ := v.(json.RawMessage)
		return run(ctx, args)
	}}
}

// By adapts a function of a tool's typed input to the Definition hooks
// that get the decoded input as any — EffectFor, Summarize, UntrustedFor:
// f gets the input as In (the zero In when there is none).
func By[In, Out any](f func(ctx context.Context, in In) Out) func(context.Context, any) Out {
	return func(ctx context.Context, v any) Out {
		in, _ := v.(In)
		return f(ctx, in)
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
	// Approved is the id of the call the person approved and Summary the
	// sentence they approved: that call runs without asking again, if
	// its arguments still say the same.
	Approved        string
	ApprovedSummary string
	// Tainted is set once the turn has read untrusted content (see
	// Definition.Untrusted).
	Tainted bool
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
