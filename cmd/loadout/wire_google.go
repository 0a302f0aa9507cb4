package main

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"loadout/google"
	"loadout/google/workspace"
	"loadout/settings"
	"loadout/store"
	"loadout/tools"
)

// The store keeps the Google accounts, and the connect links under way,
// so that Google may send a person back to any process sharing it.
var (
	_ google.TokenStore = (*store.DB)(nil)
	_ google.StateStore = (*store.DB)(nil)
)

// registerGoogle adds the Google Workspace groups when Google is configured
// (or when only listing tools). Configured without a token key is an
// error that says how to make one.
func (a *app) registerGoogle(ctx context.Context, reg *tools.Registry) error {
	gc := a.cfg.Google
	if !gc.Configured() && !a.listAll {
		return nil
	}
	var client google.Client = workspace.Unconfigured{}
	if gc.Configured() {
		acc, err := workspace.Accounts(gc, a.db, a.cfg.HTTP.Listen, a.log)
		switch {
		case err == nil:
			client, a.google = acc, acc
		case !a.listAll:
			return err
		}
	}
	for _, build := range workspace.Groups(gc, workspace.Deps{Save: a.workspaces.SaveForCaller, PDF: a.cfg.PDF.Limits}) {
		if err := build.New(client).Register(reg); err != nil {
			return err
		}
	}
	return nil
}

// googleLogin runs `loadout google login -user KEY`: the loopback flow
// for a person on this machine.
func googleLogin(ctx context.Context, cfg settings.Config, log *slog.Logger, user string, out io.Writer) error {
	if user == "" || !strings.Contains(user, ":") {
		return errUsage{"google login: -user is required, as channel:id, e.g. console:local (" + settings.ChannelKinds().ExampleUser() + ")"}
	}
	if !cfg.Google.Configured() {
		return workspace.ErrNotConfigured // before a store is made
	}
	db, err := cfg.Store.Open()
	if err != nil {
		return err
	}
	defer db.Close()
	return workspace.Login(ctx, cfg.Google, db, cfg.HTTP.Listen, log, user, out)
}
