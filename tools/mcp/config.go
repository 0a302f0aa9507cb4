package mcp

import (
	"context"
	"fmt"
	"net/url"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/config"
)

// Server is one entry of mcp.servers: a command run over stdio, or a
// streamable-HTTP endpoint.
type Server struct {
	// Name names the group (mcp_<name>) and prefixes the tools
	// (<name>_<tool>).
	Name string `yaml:"name"`
	// Description is the group's line in the listing; default the
	// server's own instructions, else a generic line.
	Description string `yaml:"description"`
	// Command and Args start a stdio server; Env is added to the small
	// environment it gets (PATH, HOME, LANG, TMPDIR and USER of loadout's).
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args" secret:"url"`
	Env     map[string]string `yaml:"env" secret:"true"`
	// URL is a streamable-HTTP server; Headers go with every request.
	URL     string            `yaml:"url" secret:"url"`
	Headers map[string]string `yaml:"headers" secret:"true"`
	// Auth "person" signs each person in to the server with their own
	// account (OAuth 2.1, the MCP authorization spec); "" uses Headers.
	Auth string `yaml:"auth"`
	// ClientID and ClientSecret identify loadout at the server's
	// authorization server when it has no dynamic registration; Scopes
	// replace the scopes the server names.
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret" secret:"true"`
	Scopes       []string `yaml:"scopes"`
	// Timeout bounds one call. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// Roots offers the server the calling chat's workspace as its one
	// root (a file:// URI), changed as calls come from other chats.
	// Default true; false offers no roots.
	Roots *bool `yaml:"roots"`
	// SamplingTools lets the server sample with tools: the model may
	// call the server's own tools in its answer, and the server runs
	// them (loadout never does). Default false: such a request is
	// refused.
	SamplingTools bool `yaml:"sampling_tools"`
	// SamplingPerCall is how many sampling requests one call of a tool
	// may make, over all its rounds; the server gets an error for any
	// more. 0 is DefaultSamplingPerCall.
	SamplingPerCall int `yaml:"sampling_per_call"`

	// transport, when set, replaces Command and URL (tests use the SDK's
	// in-memory transport).
	transport func() sdk.Transport
}

// Config is the mcp section.
type Config struct {
	Servers []Server `yaml:"servers"`
	// ElicitationTTL is how long a server's question waits for the
	// person's answer; default 10 minutes.
	ElicitationTTL time.Duration `yaml:"elicitation_ttl"`
	// RedirectURL is loadout's public URL of CallbackPath, where people
	// come back after signing in to a server with auth: person.
	RedirectURL string `yaml:"redirect_url" secret:"url"`
}

// NeedsSignIn reports whether a server signs people (or the operator) in.
func (c Config) NeedsSignIn() bool {
	for _, s := range c.Servers {
		if s.Auth != AuthNone {
			return true
		}
	}
	return false
}

// Deps are what the servers' requests reach in loadout. The zero value
// answers every request a server makes of the client with an error.
type Deps struct {
	// ElicitationTTL is Config.ElicitationTTL.
	ElicitationTTL time.Duration
	// Sample runs a server's sampling request; nil leaves sampling off
	// (not offered to servers).
	Sample Sampler
	// Rules keeps a person's allowance for a server to use the model as
	// their rule; nil asks them at every request.
	Rules Rules
	// Workspace is a chat's workspace directory, the root offered to
	// servers; nil offers none.
	Workspace func(chatKey string) string
	// SignIns signs people in to servers with auth: person; nil leaves
	// those servers unusable.
	SignIns *SignIns
	// Save keeps a file a tool returned (an image, audio, a resource's
	// bytes) in the calling chat's workspace (tools.CallerFrom(ctx)) and
	// returns the name it got; nil keeps none.
	Save func(ctx context.Context, name string, data []byte) (string, error)
}

func (d Deps) elicitationTTL() time.Duration {
	if d.ElicitationTTL <= 0 {
		return DefaultElicitationTTL
	}
	return d.ElicitationTTL
}

// Check reports the first problem of each server, naming its key.
func (c Config) Check(ch *config.Checker) {
	seen := map[string]bool{}
	for i, s := range c.Servers {
		key := fmt.Sprintf("servers[%d]", i)
		bad := func(field, format string, a ...any) { ch.Bad(key+"."+field, format, a...) }
		switch {
		case !validName(s.Name):
			bad("name", "must be 1–40 of a-z, 0-9 and _, starting with a letter, got %q", s.Name)
		case seen[s.Name]:
			bad("name", "%q is used by another server", s.Name)
		}
		seen[s.Name] = true
		switch {
		case (s.Command == "") == (s.URL == ""):
			bad("command", "give either command (a stdio server) or url (a streamable-HTTP server)")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("url", "must be an http(s) URL, got %q", s.URL)
			}
		}
		if s.Timeout < 0 {
			bad("timeout", "must not be negative")
		}
		if s.SamplingPerCall < 0 {
			bad("sampling_per_call", "must be 0 (the default, %d) or a number of sampling requests, got %d", DefaultSamplingPerCall, s.SamplingPerCall)
		}
		switch {
		case s.Auth != AuthNone && s.Auth != AuthPerson && s.Auth != AuthOperator:
			bad("auth", "must be person, operator or left out, got %q", s.Auth)
		case s.Auth != AuthNone && s.URL == "":
			bad("auth", "a sign-in needs a streamable-HTTP server (url)")
		case s.Auth == AuthPerson && c.RedirectURL == "":
			ch.Bad("redirect_url", "is needed for servers[%d].auth: person: loadout's public URL of %s", i, CallbackPath)
		}
	}
	if c.ElicitationTTL < 0 {
		ch.Bad("elicitation_ttl", "must not be negative")
	}
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 40 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
