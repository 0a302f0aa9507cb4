package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/api/option"

	"loadout/bridge"
	"loadout/chat"
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
	"loadout/store"
	"loadout/tools"
)

var _ google.TokenStore = (*store.DB)(nil)

// googleGroups lists the Workspace groups loadout registers: those
// google.groups names (all when it is empty), each made with its settings
// from gc.
func googleGroups(gc GoogleConfig, deps googleDeps) []func(google.Client) google.Group {
	var out []func(google.Client) google.Group
	for _, build := range allGoogleGroups(gc, deps) {
		if len(gc.Groups) == 0 || slices.Contains(gc.Groups, build(unconfigured{}).Name) {
			out = append(out, build)
		}
	}
	return out
}

// googleDeps are what Workspace groups use of the rest of loadout.
type googleDeps struct {
	// save keeps a file in the calling chat's workspace (Drive exports).
	save func(ctx context.Context, name string, data []byte) (string, error)
}

// saveExport keeps an exported file in the calling chat's workspace.
func (a *app) saveExport(ctx context.Context, name string, data []byte) (string, error) {
	if a.workspaces == nil {
		return "", &tools.Error{Code: "not_available", Message: "This chat has no files here."}
	}
	saved, _, err := a.workspaces.Save(ctx, tools.CallerFrom(ctx).ChatKey, name, bytes.NewReader(data))
	return saved, err
}

// googleGroupNames are the names google.groups may list.
func googleGroupNames() []string {
	var names []string
	for _, build := range allGoogleGroups(GoogleConfig{}, googleDeps{}) {
		names = append(names, build(unconfigured{}).Name)
	}
	return names
}

// allGoogleGroups is every Workspace group: adding one is one line here.
func allGoogleGroups(gc GoogleConfig, deps googleDeps) []func(google.Client) google.Group {
	return []func(google.Client) google.Group{
		func(c google.Client) google.Group { return gmail.New(c, gmail.Options{Send: gc.Gmail.Send}) },
		func(c google.Client) google.Group { return gmailsettings.New(c, gmailsettings.Options{}) },
		func(c google.Client) google.Group { return drive.New(c, drive.Options{Save: deps.save}) },
		func(c google.Client) google.Group { return calendar.New(c, calendar.Options{}) },
		func(c google.Client) google.Group { return contacts.New(c, contacts.Options{}) },
		func(c google.Client) google.Group { return docs.New(c, docs.Options{}) },
		func(c google.Client) google.Group { return sheets.New(c, sheets.Options{}) },
		func(c google.Client) google.Group { return slides.New(c, slides.Options{}) },
		func(c google.Client) google.Group { return forms.New(c, forms.Options{}) },
		func(c google.Client) google.Group { return tasks.New(c, tasks.Options{}) },
	}
}

// googleScopes is the union of the enabled groups' scopes: what /connect
// asks for.
func googleScopes(gc GoogleConfig) []string {
	var s []string
	for _, build := range googleGroups(gc, googleDeps{}) {
		s = append(s, build(unconfigured{}).Scopes...)
	}
	return s
}

// googleConfigured reports whether an OAuth client is set.
func (c GoogleConfig) configured() bool {
	return c.ClientID != "" || c.CredentialsFile != ""
}

// googleCallbackPath is where the OAuth redirect is served.
const googleCallbackPath = "/oauth/google/callback"

// googleAccounts builds the OAuth accounts from the config: the client
// from google.client_id/client_secret or google.credentials_file, the key
// from google.token_key; the OAuth endpoints from google.auth_url and
// google.token_url, else the credentials file's, else Google's.
func (a *app) googleAccounts() (*google.Accounts, error) {
	gc := a.cfg.Google
	id, secret, redirect := gc.ClientID, gc.ClientSecret, gc.RedirectURL
	authURL, tokenURL := gc.AuthURL, gc.TokenURL
	if gc.CredentialsFile != "" {
		creds, err := google.ReadCredentials(gc.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("google.credentials_file: %w", err)
		}
		if id == "" {
			id, secret = creds.ClientID, creds.ClientSecret
		}
		authURL, tokenURL = cmp.Or(authURL, creds.AuthURL), cmp.Or(tokenURL, creds.TokenURL)
		if redirect == "" {
			for _, u := range creds.RedirectURLs {
				if strings.HasSuffix(u, googleCallbackPath) {
					redirect = u
				}
			}
		}
	}
	if redirect == "" {
		redirect = "http://" + a.cfg.HTTP.Listen + googleCallbackPath
	}
	key, err := google.ParseKey(gc.TokenKey)
	if err != nil {
		return nil, fmt.Errorf("google.token_key: %w", err)
	}
	acc, err := google.New(google.Config{
		ClientID: id, ClientSecret: secret, RedirectURL: redirect, Scopes: googleScopes(gc),
		Key: key, Store: a.db, Endpoint: gc.Endpoint,
		AuthURL: authURL, TokenURL: tokenURL, RevokeURL: gc.RevokeURL, Logger: a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("google: %w", err)
	}
	return acc, nil
}

// unconfigured is the client of groups registered only to be listed.
type unconfigured struct{}

func (unconfigured) Options(context.Context, google.Service) ([]option.ClientOption, error) {
	return nil, &tools.Error{Code: tools.CodeNotConnected, Message: "Google is not set up on this server.",
		Suggestion: "Tell the person the owner has to configure google.client_id and google.token_key first."}
}

// registerGoogle adds the Google Workspace groups when Google is configured
// (or when only listing tools). Configured without a token key is an
// error that says how to make one.
func (a *app) registerGoogle(ctx context.Context, reg *tools.Registry) error {
	gc := a.cfg.Google
	if !gc.configured() && !a.listAll {
		return nil
	}
	var client google.Client = unconfigured{}
	if gc.configured() {
		acc, err := a.googleAccounts()
		switch {
		case err == nil:
			client, a.google = acc, acc
		case !a.listAll:
			return err
		}
	}
	for _, build := range googleGroups(gc, googleDeps{save: a.saveExport}) {
		if err := build(client).Register(reg); err != nil {
			return err
		}
	}
	return nil
}

// wireGoogle adds /connect, /disconnect and the OAuth callback over the
// accounts registerGoogle built. A finished
// connection is announced in the chat that asked, through a.hub (the
// browser page says so too).
func (a *app) wireGoogle(ctx context.Context) error {
	if !a.cfg.Google.configured() {
		notSetUp := func(context.Context, chat.Inbound, string) (string, error) {
			return "Google isn't set up on this server. The owner needs to add an OAuth client (google.client_id) to the config first.", nil
		}
		a.router.Register(bridge.Command{Name: "connect", Args: "google", Help: "connect your Google account", Hidden: true, Run: notSetUp})
		a.router.Register(bridge.Command{Name: "disconnect", Args: "google", Help: "disconnect your Google account", Hidden: true, Run: notSetUp})
		return nil
	}
	acc := a.google
	if acc == nil { // only listing tools, with an unusable Google setup
		return nil
	}
	notify := &a.hub
	path := googleCallbackPath
	if u, err := url.Parse(a.cfg.Google.RedirectURL); err == nil && u.Path != "" && a.cfg.Google.RedirectURL != "" {
		path = u.Path
	}
	a.mux.Handle("GET "+path, acc.CallbackHandler(notify))
	a.router.Register(bridge.Command{Name: "connect", Args: "google", Help: "connect your Google account",
		Run: func(ctx context.Context, in chat.Inbound, args string) (string, error) {
			if !strings.EqualFold(strings.TrimSpace(args), "google") {
				return "Usage: /connect google", nil
			}
			if !a.hub.Private(in.ChatKey) {
				// Whoever opens a link consents for the person who asked:
				// it never goes where others can open it.
				return a.connectPrivately(in.ChatKey), nil
			}
			link, err := acc.AuthURL(in.UserKey, in.ChatKey)
			if err != nil {
				a.log.Error("google: connect link", "err", err)
				return "Sorry, I couldn't make a Google sign-in link right now.", nil
			}
			text := "Open this link to connect your Google account. It works once, for the next 10 minutes, and only for you — don't share it:\n" + link
			if strings.HasPrefix(in.UserKey, "console:") {
				text = "In `loadout chat` nothing listens for Google's answer; run `loadout google login -user " + in.UserKey + "` in another terminal instead. With `loadout serve` running, this link works too:\n" + link
			}
			return text, nil
		}})
	a.router.AddStatus(func(ctx context.Context, in chat.Inbound) (string, error) {
		email, ok, at, err := acc.Account(ctx, in.UserKey)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return "Google account: not connected (/connect google in a private chat)", nil
		case email == "" || !a.hub.Private(in.ChatKey):
			// The address is for the person alone: others read a group.
			return "Google account: connected on " + at.Format("2006-01-02"), nil
		}
		return "Google account: " + email + " (connected on " + at.Format("2006-01-02") + ")", nil
	})
	a.router.Register(bridge.Command{Name: "disconnect", Args: "google", Help: "disconnect your Google account",
		Run: func(ctx context.Context, in chat.Inbound, args string) (string, error) {
			if !strings.EqualFold(strings.TrimSpace(args), "google") {
				return "Usage: /disconnect google", nil
			}
			err := acc.Disconnect(ctx, in.UserKey)
			switch {
			case errors.Is(err, google.ErrNotConnected):
				return "No Google account is connected for you.", nil
			case errors.Is(err, google.ErrRevokeFailed):
				a.log.Warn("google: revoke failed", "user", in.UserKey, "err", err)
				return "I've forgotten your Google account, but Google could not be reached to revoke my access. You can remove it at https://myaccount.google.com/permissions.", nil
			case err != nil:
				return "", err
			}
			return "Your Google account is disconnected and my access to it is revoked.", nil
		}})
	return nil
}

// connectPrivately tells a person who asked for a sign-in link in a
// shared chat where to get it instead.
func (a *app) connectPrivately(chatKey string) string {
	const why = "To keep your account safe, I only send Google sign-in links in a private chat: anyone who opened one here could connect their own account in your name."
	switch {
	case strings.HasPrefix(chatKey, "telegram:"):
		if a.tgBot != nil {
			if name := a.tgBot.UserName(); name != "" {
				return why + " Open https://t.me/" + name + "?start=connect and press Start."
			}
		}
		return why + " Open a private chat with me and send /connect google there."
	case strings.HasPrefix(chatKey, "slack:"):
		return why + " Open a direct message with me (under Apps) and send connect google there."
	}
	return why + " Send /connect google in a private chat with me."
}

// googleCommand runs `loadout google login -user KEY`: the loopback flow
// for a person on this machine.
func googleLogin(ctx context.Context, cfg Config, log *slog.Logger, user string, out io.Writer) error {
	if user == "" || !strings.Contains(user, ":") {
		return errUsage{"google login: -user is required, as channel:id, e.g. console:local or telegram:123456"}
	}
	if !cfg.Google.configured() {
		return errors.New("google: not configured: set google.client_id and google.client_secret (or google.credentials_file)")
	}
	db, err := cfg.Store.open()
	if err != nil {
		return err
	}
	defer db.Close()
	a := &app{cfg: cfg, log: log, db: db}
	acc, err := a.googleAccounts()
	if err != nil {
		return err
	}
	c, err := acc.LoginLoopback(ctx, user, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Connected a Google account for %s (%d permissions).\n", c.UserKey, len(c.Scopes))
	return nil
}
