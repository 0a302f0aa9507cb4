package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error codes the model sees in structured error results.
const (
	CodeMissingParameter = "missing_parameter"
	CodeInvalidArgument  = "invalid_argument"
	CodeNotFound         = "not_found"
	CodeEmptyGroup       = "empty_group"
	CodeNotLoaded        = "not_loaded"
	CodeNotConnected     = "not_connected"
	CodePermission       = "permission"
	CodeUnavailable      = "unavailable"
	CodeTimeout          = "timeout"
	CodeInternal         = "internal"
	CodeTooManyCalls     = "too_many_calls"
)

// MaxErrorMessage caps the message of a structured error, in characters.
const MaxErrorMessage = 1000

// Error is a failure the model can act on. It is returned to the model as
// {"status":"error","code":…,"message":…,"suggestion":…} plus Details.
type Error struct {
	Code       string
	Message    string
	Suggestion string
	// Details are extra fields merged into the result, such as
	// allowed_actions or allowed_fields.
	Details map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// JSON renders the error as the result the model receives.
func (e *Error) JSON() string {
	m := make(map[string]any, 4+len(e.Details))
	for k, v := range e.Details {
		m[k] = v
	}
	m["status"] = "error"
	m["code"] = e.Code
	m["message"] = truncate(e.Message, MaxErrorMessage)
	if e.Suggestion != "" {
		m["suggestion"] = e.Suggestion
	}
	b, err := json.Marshal(m)
	if err != nil {
		// Details held something unmarshalable; drop them.
		b, _ = json.Marshal(map[string]string{"status": "error", "code": e.Code, "message": truncate(e.Message, MaxErrorMessage)})
	}
	return string(b)
}

// truncate cuts s to at most n characters, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// MissingParameter is the error for a domain tool's action called without
// a parameter it needs; the model reads which one in required_param.
func MissingParameter(tool, action, param string) *Error {
	return &Error{Code: CodeMissingParameter, Message: fmt.Sprintf("Action '%s' needs '%s'.", action, param),
		Suggestion: fmt.Sprintf("Call %s again with action '%s' and %s.", tool, action, param), Details: map[string]any{"required_param": param}}
}

// UnknownAction is the error for an action a domain tool does not have;
// the model reads the ones it has in allowed_actions.
func UnknownAction(tool, action string, allowed ...string) *Error {
	return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("%s has no action '%s'.", tool, action),
		Suggestion: "Use one of: " + strings.Join(allowed, ", ") + ".", Details: map[string]any{"allowed_actions": allowed}}
}
