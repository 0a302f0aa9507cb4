// Package google gives tool groups authorised Google API clients that act
// for the person whose message started the turn, and maps Google API errors
// to tool errors. One package per Workspace group lives under it.
package google

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"loadout/tools"
)

// Service names one Google API for Client.Options.
type Service struct {
	// Group is the tool group that uses it, named in errors.
	Group string
	// Path is the service's base path below google.endpoint when an
	// endpoint override is set: "" for Gmail (its paths start with
	// gmail/v1/), "drive/v3/", "calendar/v3/".
	Path string
	// Scopes are the OAuth scopes the group's tools need.
	Scopes []string
}

// Client hands out client options for the calling person.
type Client interface {
	// Options returns options for a google.golang.org/api service that act
	// as tools.CallerFrom(ctx).UserKey. It returns a *tools.Error with code
	// not_connected when that person has not connected an account (or the
	// grant lacks svc.Scopes), so a tool can return the error as is. None
	// of the options returned is nil.
	Options(ctx context.Context, svc Service) ([]option.ClientOption, error)
}

// NewService builds a google.golang.org/api service with newService (such
// as drive.NewService) from c's options for svc, acting as the caller.
// An error from c is returned as is, so a not_connected tool error reaches
// the model unchanged; an error from newService is wrapped with prefix.
func NewService[S any](ctx context.Context, c Client, svc Service, prefix string,
	newService func(context.Context, ...option.ClientOption) (S, error)) (S, error) {
	var zero S
	opts, err := c.Options(ctx, svc)
	if err != nil {
		return zero, err
	}
	s, err := newService(ctx, opts...)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", prefix, err)
	}
	return s, nil
}

// EndpointOption returns option.WithEndpoint for svc under endpoint, or nil
// when endpoint is empty (the service's real URL is used). A Client skips
// the nil option.
func EndpointOption(endpoint string, svc Service) option.ClientOption {
	if endpoint == "" {
		return nil
	}
	return option.WithEndpoint(strings.TrimRight(endpoint, "/") + "/" + svc.Path)
}

// NotConnected is the error for a person without a usable Google account.
func NotConnected(reason string) *tools.Error {
	return &tools.Error{
		Code:       tools.CodeNotConnected,
		Message:    "The person's Google account is not connected" + reason + ".",
		Suggestion: "Ask the person to send /connect google in a private chat with you and follow the link, then try again.",
	}
}

// MapError turns a Google API error into a tool error: 404 not_found, 401
// and 403 permission (with a reconnect hint), 429 and 5xx unavailable,
// other 4xx invalid_argument with Google's explanation. A refused token
// refresh is not_connected and an unreachable Google unavailable, in fixed
// words: their raw text quotes URLs and token responses. Timeouts and
// other errors pass through unchanged; the executor names the first and
// reports the rest as internal, with the text only in the log.
func MapError(err error, what string) error {
	if err == nil {
		return nil
	}
	var te *tools.Error
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.Response != nil && (re.Response.StatusCode == http.StatusTooManyRequests || re.Response.StatusCode >= 500) {
			return &tools.Error{Code: tools.CodeUnavailable, Message: "Google could not renew the account's access just now.",
				Suggestion: "Try again in a minute, or tell the person Google is having trouble."}
		}
		return NotConnected(" any more (Google did not renew its access)")
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return &tools.Error{Code: tools.CodeUnavailable, Message: "Google could not be reached.",
				Suggestion: "Try again in a minute, or tell the person Google cannot be reached."}
		}
		return err
	}
	msg := ge.Message
	if msg == "" {
		msg = http.StatusText(ge.Code)
	}
	switch {
	case ge.Code == http.StatusNotFound:
		return &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("%s was not found: %s", what, msg),
			Suggestion: "Check the id; search or list again to get a current one."}
	case ge.Code == http.StatusUnauthorized || ge.Code == http.StatusForbidden:
		if ge.Code == http.StatusForbidden && isRateLimit(ge) {
			return &tools.Error{Code: tools.CodeUnavailable, Message: "Google is rate-limiting requests: " + msg,
				Suggestion: "Wait a little and try again, or tell the person."}
		}
		return &tools.Error{Code: tools.CodePermission, Message: fmt.Sprintf("Google refused access to %s: %s", what, msg),
			Suggestion: "The account may lack permission or the grant may be missing a scope; ask the person to send /connect google again."}
	case ge.Code == http.StatusTooManyRequests || ge.Code >= 500:
		return &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("Google is unavailable (%d): %s", ge.Code, msg),
			Suggestion: "Try again in a minute, or tell the person Google is having trouble."}
	case ge.Code >= 400:
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("Google rejected the request for %s: %s", what, msg),
			Suggestion: "Fix the arguments Google complained about and try again."}
	}
	return err
}

func isRateLimit(ge *googleapi.Error) bool {
	for _, e := range ge.Errors {
		if strings.Contains(e.Reason, "ateLimit") {
			return true
		}
	}
	return false
}
