// Package ui is loadout's web console, served on http.listen when
// ui.enabled: the operator's pages (overview, chats, approvals, people,
// tools, configuration) and a person's own pages, server-rendered from
// embedded templates with no script at all. The operator signs in with
// ui.admin_token; a person with a one-time link that /web sends them in
// a private chat. Sessions live in the store, so they can be revoked and
// survive restarts; every state-changing request carries the session's
// CSRF token.
package ui

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/config"
	"loadout/tools"
	"loadout/tools/schedule"
)

// OperatorKey is the operator's user key on the console.
const OperatorKey = "ui:operator"

// Config is the ui section.
type Config struct {
	// Enabled serves the console on http.listen.
	Enabled bool `yaml:"enabled"`
	// AdminToken is the operator's sign-in token; only its hash is kept
	// in memory.
	AdminToken string `yaml:"admin_token" secret:"true"`
	// SessionTTL is how long a sign-in lasts; default 12h.
	SessionTTL config.Duration `yaml:"session_ttl"`
	// LinkTTL is how long a /web sign-in link works; default 10m.
	LinkTTL config.Duration `yaml:"link_ttl"`
	// BaseURL is the console's address as people's browsers reach it
	// (https://loadout.example.com), which /web links start with;
	// default http://<http.listen>.
	BaseURL string `yaml:"base_url" secret:"url"`
}

// minTokenLen is the shortest admin token accepted.
const minTokenLen = 16

// Check checks the section.
func (c Config) Check(ch *config.Checker) {
	if !c.Enabled {
		return
	}
	if len(c.AdminToken) < minTokenLen {
		ch.Bad("admin_token", "must be set to a random secret of at least %d characters when ui.enabled is true (e.g. admin_token: ${LOADOUT_UI_ADMIN_TOKEN}; make one with `openssl rand -hex 24`)", minTokenLen)
	}
	ch.Duration("session_ttl", c.SessionTTL.Std(), time.Minute)
	ch.Duration("link_ttl", c.LinkTTL.Std(), 30*time.Second)
	if c.BaseURL != "" {
		ch.URL("base_url", c.BaseURL)
	}
}

// Chats is what the console needs of the running channels (bridge.Hub
// is it).
type Chats interface {
	// Tell hands a person's message to a chat, as if sent there.
	Tell(ctx context.Context, chatKey, userKey, id, text string) error
	Private(chatKey string) bool
	Invite(chatKey, command string) string
	// Admits reports whether the channel a person came from lets them
	// in now (bridge.Admitter); an error: it cannot tell.
	Admits(ctx context.Context, userKey string) (bool, error)
}

// Google is a person's Google connection (google.Accounts is it).
type Google interface {
	Account(ctx context.Context, userKey string) (email string, connected bool, at time.Time, err error)
	Disconnect(ctx context.Context, userKey string) error
}

// Status is the process's state as the overview shows it.
type Status struct {
	Model     string
	Providers []string
	Channels  []ChannelState
	// Problems are what /readyz reports as not ready.
	Problems []string
	// Errors count, since the process started, what went wrong: failed
	// and quarantined messages, refused sends, failed model and tool
	// calls ("3 tool calls failed").
	Errors []string
	// Servers are the MCP servers.
	Servers []ServerState
	// Meaning is search by meaning's line (store.DB.MeaningStatus): the
	// embedding model, how many rows are embedded of how many, what it
	// cost since start; "" while embeddings are off.
	Meaning string
}

// ChannelState is a channel and whether it is connected.
type ChannelState struct {
	Name  string
	Ready bool
	// Allowed are the people the channel's allow-list names.
	Allowed []string
}

// ServerState is an MCP server's group and whether it lists its tools.
type ServerState struct {
	Group string
	State string
}

// Setting is one key of the effective configuration.
type Setting struct {
	Key   string
	Value string
	// Secret: Value is "set" or "unset", never the value.
	Secret bool
}

// Deps are what the console reads and acts through.
type Deps struct {
	Store Store
	// Chats are the running channels; nil lets no person in (the
	// operator only).
	Chats    Chats
	Registry *tools.Registry
	// Count counts tokens (the tokenizer of `loadout tools`).
	Count func(string) int
	// Scheduler runs due tasks after "run now".
	Scheduler *schedule.Scheduler
	// Google is nil when Google is not set up.
	Google Google
	// Status reports the process's state; Settings the effective
	// configuration, secrets shown only as set or unset.
	Status   func(ctx context.Context) Status
	Settings func() []Setting
	// Cost prices a chat's tokens where llm.prices is set; nil shows
	// tokens only.
	Cost func(promptTokens, completionTokens int64) (string, bool)
	// Listen is http.listen: cookies are Secure unless it is loopback.
	Listen string
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Console is the web console. It is safe for concurrent use.
type Console struct {
	cfg       Config
	d         Deps
	log       *slog.Logger
	adminHash [sha256.Size]byte
	secure    bool
	pages     map[string]*template.Template
	static    fs.FS
	now       func() time.Time
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Default durations.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultLinkTTL    = 10 * time.Minute
)

// New builds the console; Mount serves it.
func New(cfg Config, d Deps) (*Console, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = config.Duration(DefaultSessionTTL)
	}
	if cfg.LinkTTL <= 0 {
		cfg.LinkTTL = config.Duration(DefaultLinkTTL)
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Count == nil {
		d.Count = func(s string) int { return len(s) / 4 }
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + d.Listen
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	st, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, d: d, log: d.Logger, adminHash: sha256.Sum256([]byte(cfg.AdminToken)),
		secure: !loopback(d.Listen), pages: pages, static: st, now: d.Now}
	return c, nil
}

// URL is where the console is reached (ui.base_url, else
// http://<http.listen>).
func (c *Console) URL() string { return c.cfg.BaseURL }

// loopback reports whether listen is a loopback address, where cookies
// need not be Secure (plain http on the machine itself).
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var _ bridge.WebAuth = (*Console)(nil)

// Register adds /web to the router: a one-time sign-in link, sent only
// in a private chat.
func (c *Console) Register(r *bridge.Router) {
	r.Register(bridge.Command{Name: "web", Help: "get a one-time link to your page on the web",
		Run: func(ctx context.Context, in chat.Inbound, _ string) (string, error) {
			if c.d.Chats != nil && !c.d.Chats.Private(in.ChatKey) {
				// Whoever opens the link is signed in as the person who
				// asked: it never goes where others can read it.
				return "I only send sign-in links in a private chat: anyone here who opened it would be signed in as you. " +
					c.d.Chats.Invite(in.ChatKey, "web"), nil
			}
			link, err := c.Link(ctx, in.UserKey)
			if errors.Is(err, bridge.ErrNotAdmitted) {
				return "I can't send you a sign-in link: I can't confirm that the chat app you came from still lets you talk to me, so your web sessions have ended. " +
					"Write to me there and send /web from there; if I don't answer, ask my owner to add you again.", nil
			}
			if err != nil {
				c.log.Error("ui: sign-in link", "user", in.UserKey, "err", err)
				return "Sorry, I couldn't make a sign-in link right now.", nil
			}
			return fmt.Sprintf("Open this link to sign in to your page. It works once, for the next %s, and only for you — don't share it:\n%s",
				humanTTL(c.cfg.LinkTTL.Std()), link), nil
		}})
}

func humanTTL(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	if d >= time.Minute {
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return fmt.Sprintf("%d seconds", d/time.Second)
}

// errNoSession is a request without a live session.
var errNoSession = errors.New("ui: no session")

// handlerFunc is a page or action of a signed-in viewer.
type handlerFunc func(w http.ResponseWriter, r *http.Request, v viewer) error
