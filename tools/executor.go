package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"
)

// Result statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Call is one tool call requested by the model.
type Call struct {
	ID        string
	Name      string
	Arguments string // the model's JSON text, possibly malformed
}

// Result is the outcome of one Call. Content is what the model receives:
// the tool's output on success, a structured error JSON otherwise.
type Result struct {
	CallID   string
	Name     string
	Status   string
	Code     string // error code; empty on success
	Content  string
	Duration time.Duration
	// Groups are the changes the call made to the session's loaded
	// groups: the groups load_tool_group or find_tools with load loaded,
	// the one unload_tool_group unloaded. See ApplyGroupChanges.
	Groups []GroupChange
	// Input is the call's arguments as checked, decoded and encoded
	// again (Input.JSON); empty when they could not be decoded.
	Input string
	// Untrusted is set when the call ran and what it returned is
	// untrusted content (Definition.Untrusted): its result, or its error,
	// which carries the service's own text (a 4xx/5xx body, an MCP
	// result with isError).
	Untrusted bool
	// Personal is set when the call succeeded and what it returned
	// belongs to the caller (Definition.Personal).
	Personal bool
	// Offer is, on a call held for approval (StatusPending), the scope an
	// "Always allow" of it would take; nil when none is offered.
	Offer *Scope
	// Reach is, on a call held for approval, what it reaches (ReachOf),
	// for the question and the audit trail.
	Reach *Reach
	// Images are the pictures the call returned (a tool's Media), for a
	// model that reads images; Content describes them.
	Images []Image
}

// Image is a picture a tool returned: its MIME type and bytes.
type Image struct {
	MIME string
	Data []byte
}

// Media is a tool's output with pictures: Text is what the model reads
// (naming each picture), Images go to a model that reads images.
type Media struct {
	Text   string
	Images []Image
}

// Handler runs one call.
type Handler func(ctx context.Context, call Call) Result

// Middleware wraps a Handler; the first middleware given to NewExecutor is
// the outermost.
type Middleware func(next Handler) Handler

// Executor runs a turn's tool calls.
type Executor struct {
	reg  *Registry
	log  *slog.Logger
	mw   []Middleware
	gate Gate
}

// SetGate sets the gate every call passes after its arguments are
// checked and before it runs. Call it before the executor is used.
func (x *Executor) SetGate(g Gate) { x.gate = g }

// NewExecutor returns an executor over reg with a middleware chain. log
// (slog.Default when nil) receives the full text of internal failures,
// which the model sees only as a reference id.
func NewExecutor(reg *Registry, log *slog.Logger, mw ...Middleware) *Executor {
	if log == nil {
		log = slog.Default()
	}
	return &Executor{reg: reg, log: log, mw: mw}
}

// Run executes calls in parallel against the catalog and returns one result
// per call, in the order of calls. It never panics on a tool's account and
// never returns a Go error: every failure is a structured error result.
func (x *Executor) Run(ctx context.Context, cat *Catalog, calls []Call) []Result {
	h := Handler(func(ctx context.Context, c Call) Result { return x.invoke(ctx, cat, c) })
	for i := len(x.mw) - 1; i >= 0; i-- {
		h = x.mw[i](h)
	}
	out := make([]Result, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = h(ctx, c)
		}()
	}
	wg.Wait()
	return out
}

func (x *Executor) invoke(ctx context.Context, cat *Catalog, c Call) Result {
	start := time.Now()
	res := x.resolve(ctx, cat, c)
	res.CallID, res.Name, res.Duration = c.ID, c.Name, time.Since(start)
	return res
}

func (x *Executor) resolve(ctx context.Context, cat *Catalog, c Call) Result {
	e, ok := x.reg.lookup(c.Name)
	if !ok {
		return failure(&Error{
			Code:       CodeNotFound,
			Message:    fmt.Sprintf("Tool '%s' does not exist.", c.Name),
			Suggestion: "Use only the tools in your tool list, or load a group from the Available Tool Groups with load_tool_group.",
		})
	}
	// Checked with or without a catalog: a call approved after the tool
	// was disabled comes without one.
	if CallerFrom(ctx).Disabled[c.Name] {
		return failure(&Error{
			Code:       CodeNotFound,
			Message:    fmt.Sprintf("Tool '%s' is disabled in this chat.", c.Name),
			Suggestion: "Tell the person the tool is disabled; it can be enabled again with tool_settings in the config group.",
		})
	}
	if cat != nil && !cat.Has(c.Name) {
		return failure(&Error{
			Code:       CodeNotLoaded,
			Message:    fmt.Sprintf("Tool '%s' belongs to group '%s', which is not loaded.", c.Name, e.Group),
			Suggestion: fmt.Sprintf("Call load_tool_group with group_name '%s' first, then call %s again.", e.Group, c.Name),
			Details:    map[string]any{"group": e.Group},
		})
	}
	in, te := decodeInput(e.Tool, e.schema, c.Arguments)
	if te != nil {
		return failure(te)
	}
	ctx = withMemo(ctx)
	var ran func(Result)
	if x.gate != nil {
		var res Result
		var held bool
		if res, held, ran = x.gate(ctx, e.Definition, c, in); held {
			res.Input = in.JSON
			return res
		}
	}
	res := x.runChecked(ctx, e, in)
	if ran != nil {
		ran(res)
	}
	return res
}

// runChecked runs a call whose arguments were checked and which the gate
// let through.
func (x *Executor) runChecked(ctx context.Context, e *entry, in Input) Result {
	res, err := run(ctx, e.Tool, in.Value)
	if err != nil {
		res = failure(x.toolError(ctx, e.Tool, err))
	}
	res.Input = in.JSON
	// A failure taints like a success: a tool that reads outside text
	// puts that text into its errors too.
	res.Untrusted = e.Untrusted || e.UntrustedFor != nil && e.UntrustedFor(ctx, in.Value) ||
		// A group whose tool descriptions are outside text, loaded.
		x.reg.OutsideText(res.Groups)
	res.Personal = res.Status == StatusSuccess && (e.Personal || e.PersonalFor != nil && e.PersonalFor(ctx, in.Value))
	return res
}

// run calls the tool with its timeout, turning a panic into an error.
func run(ctx context.Context, t Tool, in any) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	type outcome struct {
		v   any
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: &panicError{value: p, stack: debug.Stack()}}
			}
		}()
		v, err := t.Run(ctx, in)
		done <- outcome{v, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o = outcome{err: ctx.Err()}
	}
	if o.err != nil {
		return Result{}, o.err
	}
	switch v := o.v.(type) {
	case string:
		return Result{Status: StatusSuccess, Content: v}, nil
	case loaded:
		return Result{Status: StatusSuccess, Content: v.text, Groups: v.groups}, nil
	case Media:
		return Result{Status: StatusSuccess, Content: v.Text, Images: v.Images}, nil
	case json.RawMessage:
		return Result{Status: StatusSuccess, Content: string(v)}, nil
	}
	b, err := json.Marshal(o.v)
	if err != nil {
		return Result{}, fmt.Errorf("encode the result: %w", err)
	}
	return Result{Status: StatusSuccess, Content: string(b)}, nil
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// toolError turns a tool's failure into what the model sees. A tools.Error
// is the tool's own account and passes as is; timeouts are named; anything
// else (a panic, a raw error that may quote URLs, tokens or SQL) becomes a
// fixed internal error with a reference id, and the full error is logged
// with that id.
func (x *Executor) toolError(ctx context.Context, t Tool, err error) *Error {
	var te *Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{
			Code:       CodeTimeout,
			Message:    fmt.Sprintf("Tool '%s' did not finish within %s.", t.Name, t.Timeout),
			Suggestion: "Try a narrower request, or tell the person the service is slow.",
		}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("Tool '%s' was cancelled.", t.Name)}
	}
	ref := newRef()
	attrs := []any{"ref", ref, "tool", t.Name, "chat", CallerFrom(ctx).ChatKey, "err", err}
	var pe *panicError
	if errors.As(err, &pe) {
		attrs = append(attrs, "stack", string(pe.stack))
	}
	x.log.Error("tool failed", attrs...)
	return &Error{
		Code:       CodeInternal,
		Message:    fmt.Sprintf("Tool '%s' failed with an internal error (reference %s).", t.Name, ref),
		Suggestion: "Tell the person the tool failed and give them the reference; do not retry the same call.",
		Details:    map[string]any{"ref": ref},
	}
}

// newRef returns a short random id that ties a logged error to what the
// model and the person were told.
func newRef() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func failure(e *Error) Result {
	return Result{Status: StatusError, Code: e.Code, Content: e.JSON()}
}

// Logging returns a middleware that logs each call's name, status, error
// code and duration at Info level (Warn for errors).
func Logging(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, c Call) Result {
			r := next(ctx, c)
			level := slog.LevelInfo
			if r.Status == StatusError {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "tool call", "tool", c.Name, "call_id", c.ID,
				"status", r.Status, "code", r.Code, "duration", r.Duration, "chat", CallerFrom(ctx).ChatKey)
			return r
		}
	}
}

// CapResults cuts a successful result longer than max characters
// (runes) to max, and says so at its end, so that one tool answering with
// megabytes cannot fill the model's context or the history. Error results
// are capped already. max <= 0 leaves results whole.
func CapResults(max int) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, c Call) Result {
			res := next(ctx, c)
			if max <= 0 || res.Status != StatusSuccess || len(res.Content) <= max {
				return res
			}
			// A byte count can exceed max while the rune count does not.
			cut, runes := len(res.Content), 0
			for i := range res.Content {
				if runes == max {
					cut = i
					break
				}
				runes++
			}
			if cut == len(res.Content) {
				return res
			}
			total := runes + utf8.RuneCountInString(res.Content[cut:])
			res.Content = res.Content[:cut] + fmt.Sprintf(
				"\n[cut: the result had %d characters; only the first %d are above. Ask %s for less, such as a narrower query or the next part, if you need the rest.]",
				total, max, c.Name)
			return res
		}
	}
}
