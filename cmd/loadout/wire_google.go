package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"loadout/tools"
)

// registerGoogle adds the Google Workspace groups when Google is configured.
func (a *app) registerGoogle(ctx context.Context, reg *tools.Registry) error { return nil }

// wireGoogle adds /connect, /disconnect and the OAuth callback.
func (a *app) wireGoogle(ctx context.Context) error { return nil }

// googleCommand runs `loadout google …`.
func googleCommand(ctx context.Context, cfg Config, log *slog.Logger, args []string, out io.Writer) error {
	return errors.New("google: not available in this build")
}
