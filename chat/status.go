package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"loadout/tools"
)

// Clear closes the chat's open session; the next message opens a new one
// with no groups loaded. It reports whether a session was open. Once the
// session is closed, Config.OnClear are told, whether one was open or
// not.
func (e *Engine) Clear(ctx context.Context, chatKey string) (bool, error) {
	open, err := e.store.CloseSession(ctx, chatKey)
	if err != nil {
		return open, err
	}
	for _, f := range e.cfg.OnClear {
		f(ctx, chatKey)
	}
	return open, nil
}

// Name is the assistant's name in the chat: its own setting, else the
// configured one.
func (e *Engine) Name(ctx context.Context, chatKey string) (string, error) {
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return "", err
	}
	return firstNonEmpty(settings.Name, e.cfg.Name), nil
}

// Status describes a chat's open session.
type Status struct {
	OpenedAt time.Time
	Messages int
	Loaded   []string
	// Groups are the loaded groups in load order with what their schemas
	// cost on every request.
	Groups []GroupCost
	// ActiveTools and SchemaTokens are what one request carries now;
	// CoreTokens is the core tools' part of it.
	ActiveTools  int
	SchemaTokens int
	CoreTokens   int
	// AllTools and AllTokens are what routing: all would send.
	AllTools  int
	AllTokens int
	Usage     Usage
	Model     string
	Routing   string
	// Approvals are the calls waiting for the person's answer.
	Approvals []Approval
	// Delegates are the tasks of the sub-agents running for the chat.
	Delegates []string
}

// GroupCost is a loaded group's share of a request.
type GroupCost struct {
	Name   string
	Tools  int
	Tokens int
}

// Status reports on the chat's open session, opening one if none is.
func (e *Engine) Status(ctx context.Context, chatKey string) (Status, error) {
	sess, err := e.store.OpenSession(ctx, chatKey)
	if err != nil {
		return Status{}, fmt.Errorf("open session for %s: %w", chatKey, err)
	}
	loaded, err := e.store.LoadedGroups(ctx, sess.ID)
	if err != nil {
		return Status{}, fmt.Errorf("read loaded groups of session %d: %w", sess.ID, err)
	}
	settings, err := e.settings(ctx, chatKey)
	if err != nil {
		return Status{}, err
	}
	cat := e.catalog(loaded, settings.Disabled)
	all := e.reg.All(settings.Disabled)
	s := Status{
		OpenedAt:     sess.OpenedAt,
		Messages:     sess.Messages,
		Loaded:       cat.Loaded(),
		ActiveTools:  len(cat.Definitions()),
		SchemaTokens: tools.SchemaTokens(cat.Definitions(), e.cfg.Exact),
		CoreTokens:   tools.SchemaTokens(e.reg.Core(settings.Disabled), e.cfg.Exact),
		AllTools:     len(all),
		AllTokens:    tools.SchemaTokens(all, e.cfg.Exact),
		Usage:        sess.Usage,
		Model:        firstNonEmpty(settings.Model, e.cfg.Model),
		Routing:      e.cfg.Routing,
	}
	if s.Approvals, err = e.store.PendingApprovals(ctx, chatKey); err != nil {
		return Status{}, fmt.Errorf("read approvals of %s: %w", chatKey, err)
	}
	s.Delegates = e.running.of(chatKey)
	if e.cfg.Routing != RoutingAll {
		for _, g := range cat.Loaded() {
			defs := e.reg.GroupTools(g, settings.Disabled)
			s.Groups = append(s.Groups, GroupCost{Name: g, Tools: len(defs), Tokens: tools.SchemaTokens(defs, e.cfg.Exact)})
		}
	}
	return s, nil
}

// compact is JSON text without its spacing; other text trimmed.
func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return strings.TrimSpace(s)
	}
	return b.String()
}
