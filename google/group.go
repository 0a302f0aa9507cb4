package google

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"loadout/backoff"
	"loadout/tools"
)

// Group is one Workspace tool group as loadout registers it: the group,
// its tools and the OAuth scopes they need, made together by the group's
// New so the scopes cannot be paired with the wrong group.
type Group struct {
	tools.Group
	Tools  []tools.Tool
	Scopes []string
	// Examples are requests each tool does, by tool name (see
	// tools.Definition.Examples).
	Examples map[string][]string
}

// Register adds the group to reg. Every Workspace tool acts in the
// calling person's own account, so what each returns is marked personal
// (tools.Definition.Personal): in a chat shared with others it is shown
// on that person's turns only.
func (g Group) Register(reg *tools.Registry) error {
	ts := make([]tools.Tool, len(g.Tools))
	for i, t := range g.Tools {
		t.Personal = true
		if ex, ok := g.Examples[t.Name]; ok {
			t.Examples = ex
		}
		ts[i] = t
	}
	return reg.AddGroup(g.Group, ts...)
}

// API is how a group reaches its Google API as the calling person: the
// client, the service (endpoint path and scopes), the generated package's
// NewService, the retry policy and, optionally, the group's own error
// mapping on top of MapError.
type API[S any] struct {
	Client  Client
	Service Service
	New     func(context.Context, ...option.ClientOption) (*S, error)
	Backoff backoff.Policy
	// Map maps a failed call's final error; nil means MapError.
	Map func(err error, what string) error
}

// Connect builds the service acting as tools.CallerFrom(ctx).UserKey,
// once per turn: the turn's later calls reuse it. A person without a
// usable account gets the client's not_connected error as is.
func (a API[S]) Connect(ctx context.Context) (*S, error) {
	key := fmt.Sprintf("google.service %s %s %T", tools.CallerFrom(ctx).UserKey, a.Service.Path, (*S)(nil))
	return tools.PerTurn(ctx, key, func() (*S, error) {
		return NewService(ctx, a.Client, a.Service, fmt.Sprintf("google: %snew service", a.Service.Path), a.New)
	})
}

// Call runs fn, retrying temporary Google errors (429, 5xx, network) by
// the group's policy, and maps the final error for the model; what names
// the thing fn works on ("the file 'abc'").
func (a API[S]) Call(ctx context.Context, what string, fn func() error) error {
	return a.mapErr(Retry(ctx, a.Backoff, fn), what)
}

// CallOnce is Call for a request that must not be sent twice (mail): a
// server error is not retried, since the first try may have gone through;
// only rate limits and failures to connect are.
func (a API[S]) CallOnce(ctx context.Context, what string, fn func() error) error {
	var last error
	err := Retry(ctx, a.Backoff, func() error {
		last = fn()
		var ge *googleapi.Error
		if errors.As(last, &ge) && ge.Code >= 500 {
			return errNoRetry
		}
		return last
	})
	if errors.Is(err, errNoRetry) {
		err = last
	}
	return a.mapErr(err, what)
}

var errNoRetry = errors.New("google: not retried")

func (a API[S]) mapErr(err error, what string) error {
	if a.Map != nil {
		return a.Map(err, what)
	}
	return MapError(err, what)
}

// Do builds the service as the caller and runs fn on it with Call: the
// whole of a one-request tool.
func Do[S, T any](ctx context.Context, a API[S], what string, fn func(*S) (T, error)) (T, error) {
	return do(ctx, a, a.Call, what, fn)
}

// DoOnce is Do with CallOnce: the whole of a one-request tool whose
// request must not be sent twice (it creates something, or sends mail).
func DoOnce[S, T any](ctx context.Context, a API[S], what string, fn func(*S) (T, error)) (T, error) {
	return do(ctx, a, a.CallOnce, what, fn)
}

// do is Do and DoOnce, with call one of a's Call and CallOnce.
func do[S, T any](ctx context.Context, a API[S], call func(context.Context, string, func() error) error,
	what string, fn func(*S) (T, error)) (T, error) {
	var res, zero T
	svc, err := a.Connect(ctx)
	if err != nil {
		return zero, err
	}
	if err := call(ctx, what, func() (err error) {
		res, err = fn(svc)
		return err
	}); err != nil {
		return zero, err
	}
	return res, nil
}

// Invalid is the error for an argument the model can correct.
func Invalid(param, msg string) *tools.Error {
	return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("parameter '%s' %s", param, msg),
		Suggestion: "Fix that argument and call the tool again."}
}

// Required is the error for a missing argument, or nil when v has text.
// Blank counts as missing the way the tools trim what they send, so a
// value that passes is never sent empty.
func Required(name, v string) error {
	if strings.TrimSpace(v) != "" {
		return nil
	}
	return &tools.Error{Code: tools.CodeMissingParameter, Message: name + " is required."}
}
