// Package workspace assembles Google Workspace for loadout: the google
// section of the config, the ten groups (those google.groups names), the
// OAuth accounts, and the /connect and /disconnect commands with the
// callback that finishes a connection. Adding a group is one line in All.
package workspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/api/option"

	"loadout/bridge"
	"loadout/chat"
	"loadout/config"
	"loadout/google"
	"loadout/google/calendar"
	"loadout/google/contacts"
	"loadout/google/docs"
	"loadout/google/drive"
	"loadout/google/forms"
	"loadout/google/gmail"
	"loadout/google/gmailsettings"
	"loadout/google/sheets"
	"loadout/google/slides"
	"loadout/google/tasks"
	"loadout/tools"
	"loadout/tools/pdf"
)

// Config is the google section: Google Workspace access.
type Config struct {
	ClientID        string `yaml:"client_id"`
	ClientSecret    string `yaml:"client_secret" secret:"true"`
	CredentialsFile string `yaml:"credentials_file"`
	RedirectURL     string `yaml:"redirect_url" secret:"url"`
	TokenKey        string `yaml:"token_key" secret:"true"`
	Endpoint        string `yaml:"endpoint" secret:"url"`
	// AuthURL, TokenURL and RevokeURL are the OAuth endpoints; empty means
	// those of google.credentials_file, else Google's.
	AuthURL   string `yaml:"auth_url" secret:"url"`
	TokenURL  string `yaml:"token_url" secret:"url"`
	RevokeURL string `yaml:"revoke_url" secret:"url"`
	// Groups are the Workspace groups offered; empty means all. Consent
	// asks only for their scopes.
	Groups []string `yaml:"groups"`
	// Gmail is the Gmail group's own settings.
	Gmail GmailConfig `yaml:"gmail"`
}

// GmailConfig is the Gmail group's settings.
type GmailConfig struct {
	// Send is "send" (the default) or "draft": sends and replies become
	// drafts the person sends from Gmail.
	Send string `yaml:"send"`
}

// Configured reports whether an OAuth client is set.
func (c Config) Configured() bool { return c.ClientID != "" || c.CredentialsFile != "" }

// Check checks the google section.
func (c Config) Check(ch *config.Checker) {
	for _, g := range c.Groups {
		if !slices.Contains(Names(), g) {
			ch.Bad("groups", "%q is not a Workspace group; known: %s", g, strings.Join(Names(), ", "))
		}
	}
	if s := c.Gmail.Send; s != "" && s != gmail.SendMail && s != gmail.SendDraft {
		ch.Bad("gmail.send", `must be "send" or "draft", got %q`, s)
	}
}

// Deps are what Workspace groups use of the rest of loadout.
type Deps struct {
	// Save keeps a file in the calling chat's workspace (Drive exports).
	Save func(ctx context.Context, name string, data []byte) (string, error)
	// PDF bounds the workers PDF attachments are read in: the limits
	// and places of the pdf tools (pdf.limits, pdf.max_workers).
	PDF pdf.Limits
}

// Build is one Workspace group: its name, known without making it, and
// New, which makes it acting through a client.
type Build struct {
	Name string
	New  func(google.Client) google.Group
}

// All is every Workspace group: adding one is one line here.
func All(c Config, d Deps) []Build {
	return []Build{
		{gmail.GroupName, func(cl google.Client) google.Group {
			return gmail.New(cl, gmail.Options{Send: c.Gmail.Send, PDF: d.PDF})
		}},
		{gmailsettings.GroupName, func(cl google.Client) google.Group { return gmailsettings.New(cl, gmailsettings.Options{}) }},
		{drive.GroupName, func(cl google.Client) google.Group { return drive.New(cl, drive.Options{Save: d.Save}) }},
		{calendar.GroupName, func(cl google.Client) google.Group { return calendar.New(cl, calendar.Options{}) }},
		{contacts.GroupName, func(cl google.Client) google.Group { return contacts.New(cl, contacts.Options{}) }},
		{docs.GroupName, func(cl google.Client) google.Group { return docs.New(cl, docs.Options{}) }},
		{sheets.GroupName, func(cl google.Client) google.Group { return sheets.New(cl, sheets.Options{}) }},
		{slides.GroupName, func(cl google.Client) google.Group { return slides.New(cl, slides.Options{}) }},
		{forms.GroupName, func(cl google.Client) google.Group { return forms.New(cl, forms.Options{}) }},
		{tasks.GroupName, func(cl google.Client) google.Group { return tasks.New(cl, tasks.Options{}) }},
	}
}

// Groups are the groups loadout registers: those google.groups names
// (all when it is empty).
func Groups(c Config, d Deps) []Build {
	var out []Build
	for _, build := range All(c, d) {
		if len(c.Groups) == 0 || slices.Contains(c.Groups, build.Name) {
			out = append(out, build)
		}
	}
	return out
}

// Names are the names google.groups may list.
func Names() []string {
	var names []string
	for _, build := range All(Config{}, Deps{}) {
		names = append(names, build.Name)
	}
	return names
}

// Scopes is the union of the enabled groups' scopes: what /connect asks
// for.
func Scopes(c Config) []string {
	var s []string
	for _, build := range Groups(c, Deps{}) {
		s = append(s, build.New(Unconfigured{}).Scopes...)
	}
	return s
}

// Unconfigured is the client of groups registered only to be listed.
type Unconfigured struct{}

// Options refuses: Google is not set up.
func (Unconfigured) Options(context.Context, google.Service) ([]option.ClientOption, error) {
	return nil, &tools.Error{Code: tools.CodeNotConnected, Message: "Google is not set up on this server.",
		Suggestion: "Tell the person the owner has to configure google.client_id and google.token_key first."}
}

// CallbackPath is where the OAuth redirect is served by default.
const CallbackPath = "/oauth/google/callback"

// Accounts builds the OAuth accounts from the section: the client from
// client_id/client_secret or credentials_file, the key from token_key,
// the OAuth endpoints from auth_url and token_url, else the credentials
// file's, else Google's. listen is the HTTP server's address, for the
// default redirect.
func Accounts(c Config, store google.TokenStore, listen string, log *slog.Logger) (*google.Accounts, error) {
	id, secret, redirect := c.ClientID, c.ClientSecret, c.RedirectURL
	authURL, tokenURL := c.AuthURL, c.TokenURL
	if c.CredentialsFile != "" {
		creds, err := google.ReadCredentials(c.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("google.credentials_file: %w", err)
		}
		if id == "" {
			id, secret = creds.ClientID, creds.ClientSecret
		}
		authURL, tokenURL = cmp.Or(authURL, creds.AuthURL), cmp.Or(tokenURL, creds.TokenURL)
		if redirect == "" {
			for _, u := range creds.RedirectURLs {
				if strings.HasSuffix(u, CallbackPath) {
					redirect = u
				}
			}
		}
	}
	if redirect == "" {
		redirect = "http://" + listen + CallbackPath
	}
	key, err := google.ParseKey(c.TokenKey)
	if err != nil {
		return nil, fmt.Errorf("google.token_key: %w", err)
	}
	acc, err := google.New(google.Config{
		ClientID: id, ClientSecret: secret, RedirectURL: redirect, Scopes: Scopes(c),
		Key: key, Store: store, Endpoint: c.Endpoint,
		AuthURL: authURL, TokenURL: tokenURL, RevokeURL: c.RevokeURL, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("google: %w", err)
	}
	return acc, nil
}

// Chats is what the commands need of the channels (bridge.Hub is it):
// whether a chat is private, how to reach one privately, and a notice
// when a connection finishes.
type Chats interface {
	Private(chatKey string) bool
	Invite(chatKey, command string) string
	Notify(ctx context.Context, chatKey, text string) error
}

// TextNotSetUp answers /connect and /disconnect without Google set up.
const TextNotSetUp = "Google isn't set up on this server. The owner needs to add an OAuth client (google.client_id) to the config first."

// Commands adds /connect google, /disconnect google and the /status line
// to r, and serves the OAuth callback on mux; acc nil (Google not set up)
// adds hidden commands that say so.
func Commands(r *bridge.Router, mux *http.ServeMux, c Config, acc *google.Accounts, chats Chats, log *slog.Logger) {
	if acc == nil {
		notSetUp := func(context.Context, chat.Inbound) (string, error) { return TextNotSetUp, nil }
		r.AddConnector(bridge.Connector{Name: "google", Help: "your Google account", Hidden: true, Connect: notSetUp, Disconnect: notSetUp})
		return
	}
	path := CallbackPath
	if u, err := url.Parse(c.RedirectURL); err == nil && u.Path != "" && c.RedirectURL != "" {
		path = u.Path
	}
	mux.Handle("GET "+path, acc.CallbackHandler(chats))
	connect := func(ctx context.Context, in chat.Inbound) (string, error) {
		if !chats.Private(in.ChatKey) {
			// Whoever opens a link consents for the person who asked:
			// it never goes where others can open it.
			return "To keep your account safe, I only send Google sign-in links in a private chat: anyone who opened one here could connect their own account in your name. " +
				chats.Invite(in.ChatKey, "connect google"), nil
		}
		link, err := acc.AuthURL(in.UserKey, in.ChatKey)
		if err != nil {
			log.Error("google: connect link", "err", err)
			return "Sorry, I couldn't make a Google sign-in link right now.", nil
		}
		text := "Open this link to connect your Google account. It works once, for the next 10 minutes, and only for you — don't share it:\n" + link
		if strings.HasPrefix(in.UserKey, "console:") {
			text = "In `loadout chat` nothing listens for Google's answer; run `loadout google login -user " + in.UserKey + "` in another terminal instead. With `loadout serve` running, this link works too:\n" + link
		}
		return text, nil
	}
	r.AddStatus(func(ctx context.Context, in chat.Inbound) (string, error) {
		email, ok, at, err := acc.Account(ctx, in.UserKey)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return "Google account: not connected (/connect google in a private chat)", nil
		case email == "" || !chats.Private(in.ChatKey):
			// The address is for the person alone: others read a group.
			return "Google account: connected on " + at.Format("2006-01-02"), nil
		}
		return "Google account: " + email + " (connected on " + at.Format("2006-01-02") + ")", nil
	})
	disconnect := func(ctx context.Context, in chat.Inbound) (string, error) {
		err := acc.Disconnect(ctx, in.UserKey)
		switch {
		case errors.Is(err, google.ErrNotConnected):
			return "No Google account is connected for you.", nil
		case errors.Is(err, google.ErrRevokeFailed):
			log.Warn("google: revoke failed", "user", in.UserKey, "err", err)
			return "I've forgotten your Google account, but Google could not be reached to revoke my access. You can remove it at https://myaccount.google.com/permissions.", nil
		case err != nil:
			return "", err
		}
		return "Your Google account is disconnected and my access to it is revoked.", nil
	}
	r.AddConnector(bridge.Connector{Name: "google", Help: "your Google account", Connect: connect, Disconnect: disconnect})
}

// ErrNotConfigured is Login's error when the google section names no
// OAuth client.
var ErrNotConfigured = errors.New("google: not configured: set google.client_id and google.client_secret (or google.credentials_file)")

// Login runs the loopback flow for a person on this machine (`loadout
// google login -user KEY`), printing what to open to out; the accounts
// are c's, kept in store (Accounts).
func Login(ctx context.Context, c Config, store google.TokenStore, listen string, log *slog.Logger, user string, out io.Writer) error {
	if !c.Configured() {
		return ErrNotConfigured
	}
	acc, err := Accounts(c, store, listen, log)
	if err != nil {
		return err
	}
	conn, err := acc.LoginLoopback(ctx, user, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Connected a Google account for %s (%d permissions).\n", conn.UserKey, len(conn.Scopes))
	return nil
}

// DriveFiles reads Drive files for another group (a PDF by its Drive id),
// as the calling person, through the accounts accounts returns when
// called (nil: Google is not set up).
func DriveFiles(accounts func() *google.Accounts) func(ctx context.Context, id string, max int64) (string, []byte, error) {
	return func(ctx context.Context, id string, max int64) (string, []byte, error) {
		acc := accounts()
		if acc == nil {
			return "", nil, &tools.Error{Code: "not_available", Message: "Google is not set up here, so Drive files cannot be read."}
		}
		name, _, data, err := drive.Download(ctx, acc, id, max)
		return name, data, err
	}
}
