package tools

import (
	"context"
	"fmt"
	"strings"
)

// Admins are the operator's admins (tools.admins), by user key: besides
// a thing's owner, the only people who may change, run or delete it.
type Admins map[string]bool

// NewAdmins makes Admins from the user keys of tools.admins.
func NewAdmins(keys []string) Admins {
	a := Admins{}
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			a[k] = true
		}
	}
	return a
}

// Has reports whether userKey is an admin.
func (a Admins) Has(userKey string) bool { return userKey != "" && a[userKey] }

// Permit is the one rule of ownership: the caller may act on what
// belongs to owner when they are the owner or an admin. Otherwise it
// returns a permission error that names the owner in plain words; what
// names the thing ("Task 3").
func (a Admins) Permit(ctx context.Context, owner, what string) error {
	user := CallerFrom(ctx).UserKey
	if user == owner || a.Has(user) {
		return nil
	}
	return &Error{
		Code:       CodePermission,
		Message:    fmt.Sprintf("%s belongs to %s; only they or an admin (tools.admins) can change, run or delete it.", what, owner),
		Suggestion: "Tell the person it is not theirs; its owner can change it, or they can make their own.",
		Details:    map[string]any{"owner": owner},
	}
}
