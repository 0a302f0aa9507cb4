package bridge

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"reflect"
	"slices"
)

// Declaration is everything the program that runs a channel needs to
// know of it, declared once by the channel's package: its name, its
// config section, the shapes of its credentials, what its start-up line
// says, and how to build it. cmd keeps one list of them and derives from
// it the config sections, the logger's redaction, the start-up line, the
// help and the "no channel enabled" message, so adding a channel is one
// package and one entry in that list.
//
// C is the channel's config section (the package's Config, with the yaml
// tags of its keys, and the secret tags of those that never reach a log
// or a page: config.Secrecy). A Declaration is a plain value: it holds no
// state.
type Declaration[C any] struct {
	// Name is the channel's name: its chat keys' prefix ("telegram" for
	// "telegram:42") and its config section's key.
	Name string
	// Enabled reports whether the section turns the channel on
	// ("<name>.enabled").
	Enabled func(C) bool
	// Shapes are regular expressions (RE2) matching the platform's
	// credentials by their form, redacted wherever they appear inside a
	// longer text, such as a URL with a token in its path.
	Shapes []string
	// Allowed is the people the section's allow-list names, as the web
	// console lists them; nil for a channel without one.
	Allowed func(C) []string
	// SignedIn marks a channel whose people are signed in with the user
	// key another channel gave them (the browser chat): its name
	// prefixes chat keys but never a user key.
	SignedIn bool
	// Describe is how the start-up line names the enabled channel, such
	// as "telegram (polling)"; nil says Name.
	Describe func(C) string
	// Build makes the channel from its section and what the process
	// gives every channel. It runs only when the channel is enabled, and
	// must not connect or start anything: Run does.
	Build func(ctx context.Context, c C, env Env) (Channel, error)
}

// Env is what the process gives every channel it builds.
type Env struct {
	// Router answers the messages (and knows the commands).
	Router *Router
	// Store keeps the channel's inbox and its small states (an offset,
	// a sync token).
	Store Store
	// Delivery is the pipeline's share of the process: the same for
	// every channel but its journal and its log's name.
	Delivery Delivery
	// Mux is the process's HTTP server, for channels that mount
	// endpoints there from Build (a Mounter is mounted by the Hub).
	Mux *http.ServeMux
	// SQL is the process's database, for a channel whose SDK keeps
	// state in tables of its own (Matrix's encryption keys); nil when
	// the process gives none, and such a channel then refuses to build.
	SQL *SQL
	// Web tells a web channel who is signed in to the web console
	// (package ui); nil when ui.enabled is false, and such a channel then
	// refuses to build.
	Web WebAuth
}

// SQL is the process's database as an SDK takes it: the connection
// pool the store uses, and its dialect. A channel must not close it.
type SQL struct {
	DB *sql.DB
	// Dialect is "sqlite" or "postgres" (gorm's Dialector.Name()).
	Dialect string
}

// Store is what every channel may keep: its inbox, and small named
// states that survive restarts ("telegram:offset"). Implementations must
// be safe for concurrent use.
type Store interface {
	Inbox
	// State returns the value stored under key, "" when there is none.
	State(ctx context.Context, key string) (string, error)
	// SetState stores value under key.
	SetState(ctx context.Context, key, value string) error
	// SwapState stores value under key if key still holds old ("" when
	// it holds nothing), and reports whether it did: a value several
	// processes change is read, changed and swapped until it is.
	SwapState(ctx context.Context, key, old, value string) (bool, error)
}

// Kind is a Declaration without its config type: what a list of
// channels holds. Declare makes one.
type Kind interface {
	// Name is the channel's name and its config section's key.
	Name() string
	// ConfigType is the type of the channel's config section.
	ConfigType() reflect.Type
	// Enabled and Describe read a section, a value of ConfigType.
	Enabled(section any) bool
	Describe(section any) string
	// Shapes are the credential patterns of the Declaration.
	Shapes() []string
	// Allowed is the people a section's allow-list names.
	Allowed(section any) []string
	// UserKeys reports whether the channel's name prefixes its people's
	// user keys (false: Declaration.SignedIn).
	UserKeys() bool
	// Build builds the channel from its section.
	Build(ctx context.Context, section any, env Env) (Channel, error)
}

// Declare turns a channel's declaration into the Kind cmd lists.
func Declare[C any](d Declaration[C]) Kind { return kind[C]{d} }

type kind[C any] struct{ d Declaration[C] }

func (k kind[C]) Name() string             { return k.d.Name }
func (k kind[C]) ConfigType() reflect.Type { return reflect.TypeFor[C]() }
func (k kind[C]) Shapes() []string         { return k.d.Shapes }
func (k kind[C]) UserKeys() bool           { return !k.d.SignedIn }

func (k kind[C]) section(v any) C {
	c, ok := v.(C)
	if !ok {
		panic(fmt.Sprintf("bridge: channel %s: section of type %T, want %v", k.d.Name, v, k.ConfigType()))
	}
	return c
}

func (k kind[C]) Enabled(v any) bool { return k.d.Enabled(k.section(v)) }

func (k kind[C]) Allowed(v any) []string {
	if k.d.Allowed == nil {
		return nil
	}
	return slices.Clone(k.d.Allowed(k.section(v)))
}

func (k kind[C]) Describe(v any) string {
	if k.d.Describe == nil {
		return k.d.Name
	}
	return k.d.Describe(k.section(v))
}

func (k kind[C]) Build(ctx context.Context, v any, env Env) (Channel, error) {
	return k.d.Build(ctx, k.section(v), env)
}
