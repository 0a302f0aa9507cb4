// Package httpd is loadout's HTTP server: the limits every request meets
// (webhooks, Slack events, the OAuth callback, health and metrics) and the
// health check a container runs against it.
package httpd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Limits are the server's limits. Every handler answers quickly (a turn
// runs on the delivery pipeline, not in the request), so a request that
// is slow to arrive or large is cut off without tying anything up.
type Limits struct {
	ReadHeader, Read, Write, Idle time.Duration
	// Body caps a request body; beyond it the answer is 413.
	Body int64
}

// DefaultLimits are the limits unless a test shortens them.
var DefaultLimits = Limits{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second,
	Idle: 120 * time.Second, Body: 1 << 20 /* webhooks and Slack events are far smaller */}

// maxHeaderBytes caps a request's headers.
const maxHeaderBytes = 64 << 10

// Server is the server for h within l, logging its own errors at debug.
func Server(h http.Handler, l Limits, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           capBody(h, l.Body),
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// rawBody is the context key under which capBody keeps a request's
// uncapped body, for AllowBody.
type rawBody struct{}

// capBody caps every request's body at n bytes (413 beyond), keeping the
// uncapped body for a route that takes more (AllowBody).
func capBody(h http.Handler, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.WithContext(context.WithValue(r.Context(), rawBody{}, r.Body))
		r2.Body = http.MaxBytesReader(w, r.Body, n)
		h.ServeHTTP(w, r2)
	})
}

// AllowBody lets a route that takes uploads read up to n bytes of r's
// body instead of the server's cap (Limits.Body), and as long as read
// takes from now instead of the server's read timeout. Call it before
// reading the body; beyond n reading fails with *http.MaxBytesError.
// On a request the server did not cap (a test's handler called
// directly) it caps the body at n.
func AllowBody(w http.ResponseWriter, r *http.Request, n int64, read time.Duration) {
	raw, ok := r.Context().Value(rawBody{}).(io.ReadCloser)
	if !ok {
		raw = r.Body
	}
	r.Body = http.MaxBytesReader(w, raw, n)
	if read > 0 {
		// Not every ResponseWriter can (a recorder): the server's
		// timeout then stands.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(read))
	}
}

// Check gets /healthz of the server listening on listen (or url, when
// given) and fails unless it answers 200 within five seconds; it prints
// "ok" to out when it does.
func Check(ctx context.Context, listen, url string, out io.Writer) error {
	if url == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return fmt.Errorf("health: http.listen %q: %w", listen, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		url = "http://" + net.JoinHostPort(host, port) + "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %s does not answer: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %s", url, resp.Status)
	}
	fmt.Fprintln(out, "ok")
	return nil
}

// idleConns is how many idle connections Client keeps to each
// host: at least as many as turns and sends can run at once.
const idleConns = 32

// Client returns the client for the APIs every message calls: the
// model's and the channels' platforms'. Go's
// default transport keeps two idle connections per host, so with the
// pipeline's workers calling at once the others were closed after each
// request and opened again for the next — with TLS, a handshake each: on
// the serve benchmark 600 messages opened 204 connections to the model.
func Client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idleConns
	return &http.Client{Transport: t}
}
