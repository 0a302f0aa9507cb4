package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/config"
	"loadout/logs"
	"loadout/proc"
)

// transport is how the server is reached; for a stdio server, also the
// command, run under a keeper (loadout/proc) so that the server and what
// it starts end with loadout, however loadout ends.
func (c *Client) transport() (sdk.Transport, *exec.Cmd) {
	switch {
	case c.srv.transport != nil:
		return c.srv.transport(), nil
	case c.srv.URL != "":
		return &sdk.StreamableClientTransport{Endpoint: c.srv.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headers{c.srv.Headers, http.DefaultTransport}}}, nil
	}
	kept := proc.Command(context.Background(), c.srv.Command, c.srv.Args...)
	cmd := kept.Cmd
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range c.srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = stderrLog{log: c.log, r: logs.NewRedactor(config.Secrets(c.srv, nil), nil)}
	return &sdk.CommandTransport{Command: kept.Prepare(), TerminateDuration: 2 * time.Second}, cmd
}

// headers adds the configured headers to every request.
type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// stderrLog logs what a stdio server writes to its stderr: a server may
// print the credentials it was given, so the secrets its Server
// declares (its environment's values, its arguments' credentials) are
// taken out before the line is cut to length, where a cut could leave
// part of one for the logger to miss; the logger then takes out every
// other secret.
type stderrLog struct {
	log *slog.Logger
	r   *logs.Redactor
}

func (w stderrLog) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(string(p)); s != "" {
		w.log.Info("MCP server says", "stderr", firstLine(w.r.Text(s), 500))
	}
	return len(p), nil
}
