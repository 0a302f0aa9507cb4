package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"
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
}

// Handler runs one call.
type Handler func(ctx context.Context, call Call) Result

// Middleware wraps a Handler; the first middleware given to NewExecutor is
// the outermost.
type Middleware func(next Handler) Handler

// Executor runs a turn's tool calls.
type Executor struct {
	reg *Registry
	mw  []Middleware
}

// NewExecutor returns an executor over reg with a middleware chain.
func NewExecutor(reg *Registry, mw ...Middleware) *Executor {
	return &Executor{reg: reg, mw: mw}
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
	e, ok := x.reg.tools[c.Name]
	if !ok {
		return failure(&Error{
			Code:       CodeNotFound,
			Message:    fmt.Sprintf("Tool '%s' does not exist.", c.Name),
			Suggestion: "Use only the tools in your tool list, or load a group from the Available Tool Groups with load_tool_group.",
		})
	}
	if cat != nil && !cat.Has(c.Name) {
		if CallerFrom(ctx).Disabled[c.Name] {
			return failure(&Error{
				Code:       CodeNotFound,
				Message:    fmt.Sprintf("Tool '%s' is disabled in this chat.", c.Name),
				Suggestion: "Tell the person the tool is disabled; it can be enabled again with tool_settings in the config group.",
			})
		}
		return failure(&Error{
			Code:       CodeNotLoaded,
			Message:    fmt.Sprintf("Tool '%s' belongs to group '%s', which is not loaded.", c.Name, e.Group),
			Suggestion: fmt.Sprintf("Call load_tool_group with group_name '%s' first, then call %s again.", e.Group, c.Name),
			Details:    map[string]any{"group": e.Group},
		})
	}
	args := strings.TrimSpace(c.Arguments)
	if args == "" {
		args = "{}"
	}
	var decoded any
	if err := json.Unmarshal([]byte(args), &decoded); err != nil {
		return failure(&Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("The arguments for '%s' are not valid JSON: %v", c.Name, err),
			Suggestion: "Send the arguments as one JSON object that matches the tool's schema.",
		})
	}
	if err := e.schema.check("", decoded); err != nil {
		return failure(err)
	}
	return run(ctx, e.Tool, json.RawMessage(args))
}

// run calls the tool with its timeout, turning panics, timeouts and errors
// into structured results.
func run(ctx context.Context, t Tool, args json.RawMessage) Result {
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
		v, err := t.Run(ctx, args)
		done <- outcome{v, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		o = outcome{err: ctx.Err()}
	}
	if o.err != nil {
		return failure(toolError(t, o.err))
	}
	switch v := o.v.(type) {
	case string:
		return Result{Status: StatusSuccess, Content: v}
	case json.RawMessage:
		return Result{Status: StatusSuccess, Content: string(v)}
	}
	b, err := json.Marshal(o.v)
	if err != nil {
		return failure(&Error{Code: CodeInternal, Message: fmt.Sprintf("Tool '%s' produced a result that cannot be encoded.", t.Name)})
	}
	return Result{Status: StatusSuccess, Content: string(b)}
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

func toolError(t Tool, err error) *Error {
	var te *Error
	var pe *panicError
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &pe):
		return &Error{
			Code:       CodeInternal,
			Message:    fmt.Sprintf("Tool '%s' failed unexpectedly (%v).", t.Name, pe.value),
			Suggestion: "Tell the person the tool failed; do not retry the same call.",
		}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{
			Code:       CodeTimeout,
			Message:    fmt.Sprintf("Tool '%s' did not finish within %s.", t.Name, t.Timeout),
			Suggestion: "Try a narrower request, or tell the person the service is slow.",
		}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("Tool '%s' was cancelled.", t.Name)}
	default:
		return &Error{
			Code:       CodeInternal,
			Message:    fmt.Sprintf("Tool '%s' failed: %v", t.Name, err),
			Suggestion: "Tell the person what failed; retry only if the error looks temporary.",
		}
	}
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
