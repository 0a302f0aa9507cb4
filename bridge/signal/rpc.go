package signal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// maxResponse caps what one answer of signal-cli is read up to: an
// attachment of Signal's largest, in base64, with room to spare.
const maxResponse = maxFile*4/3 + 1<<20

// Error codes signal-cli answers with besides JSON-RPC's own.
const (
	codeUser      = -1 // the request cannot succeed as it is
	codeIO        = -3 // the network or Signal's servers failed
	codeUntrusted = -4 // a recipient's safety number changed
	codeRateLimit = -5
	codeInternal  = -32603
)

// RPCError is an error signal-cli answered a call with.
type RPCError struct {
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("signal-cli %s: %s (code %d)", e.Method, e.Message, e.Code)
}

// alreadyReceiving reports whether err is signal-cli refusing a receive
// because it receives already: another call under way (one a stopped
// process left), or a daemon not started with --receive-mode=manual.
func alreadyReceiving(err error) bool {
	var re *RPCError
	return errors.As(err, &re) && strings.Contains(re.Message, "already being received")
}

// client calls signal-cli's JSON-RPC endpoint.
type client struct {
	url      string
	http     *http.Client
	sleep    func(ctx context.Context, d time.Duration) error
	log      *slog.Logger
	observer bridge.Observer
	ids      atomic.Int64
}

// callAttempts bounds the tries of a call that fails for a reason that
// may pass.
const callAttempts = 5

// call calls method with params once and decodes its result into out
// (nil: ignored).
func (c *client) call(ctx context.Context, method string, params any, out any) error {
	req := map[string]any{"jsonrpc": "2.0", "method": method, "id": c.ids.Add(1)}
	if params != nil {
		req["params"] = params
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return &httpError{status: resp.StatusCode}
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(&r); err != nil {
		return fmt.Errorf("signal-cli %s: unreadable answer: %w", method, err)
	}
	if r.Error != nil {
		return &RPCError{Method: method, Code: r.Error.Code, Message: r.Error.Message}
	}
	if out == nil || len(r.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("signal-cli %s: unreadable result: %w", method, err)
	}
	return nil
}

// httpError is an HTTP status other than 200.
type httpError struct{ status int }

func (e *httpError) Error() string {
	return fmt.Sprintf("signal-cli answered HTTP %d %s", e.status, http.StatusText(e.status))
}

// retryable says whether a failed call may succeed if tried again: a
// network failure, a server error, an I/O failure or a rate limit of
// Signal's; never a request signal-cli refuses as it is.
func retryable(err error) (bool, time.Duration) {
	var re *RPCError
	if errors.As(err, &re) {
		switch re.Code {
		case codeIO, codeInternal:
			return true, 0
		case codeRateLimit:
			return true, 5 * time.Second
		}
		return false, 0
	}
	var he *httpError
	if errors.As(err, &he) {
		return he.status >= 500 || he.status == http.StatusTooManyRequests, 0
	}
	return true, 0 // the network
}

// do calls method, retrying what may pass up to callAttempts times.
func (c *client) do(ctx context.Context, method string, params any, out any) error {
	p := backoff.Policy{Attempts: callAttempts, Initial: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2, Sleep: c.sleep,
		OnRetry: func(err error, wait time.Duration) {
			c.observer.Retried("signal")
			c.log.Warn("signal: a call to signal-cli failed, retrying", "method", method, "err", err, "wait", wait)
		}}
	return p.Do(ctx, retryable, func(ctx context.Context) error { return c.call(ctx, method, params, out) })
}
