package google

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"time"
)

// Notifier sends a short plain message to a chat, such as "telegram:123".
// Channels that can message a chat unprompted provide one.
type Notifier interface {
	Notify(ctx context.Context, chatKey, text string) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, chatKey, text string) error

// Notify implements Notifier.
func (f NotifierFunc) Notify(ctx context.Context, chatKey, text string) error {
	return f(ctx, chatKey, text)
}

// ConnectedText tells a person which Google account was connected, so a
// wrong one is seen at once.
func ConnectedText(email string) string {
	if email == "" {
		return TextConnected
	}
	return "Your Google account " + email + " is connected. You can ask me about your mail, files and calendar now. If that is not your account, send /disconnect google."
}

// Sentences of the connect flow.
const (
	TextConnected = "Your Google account is connected. You can ask me about your mail, files and calendar now."
	TextDeclined  = "Google access was not granted, so nothing changed. Send /connect google to try again."
)

// CallbackHandler serves the OAuth redirect of /connect google
// (google.redirect_url). It finishes the flow, tells the chat through n
// (which may be nil) and shows the person a short page. A wrong, reused or
// expired state is refused with 400 and nothing is stored.
func (a *Accounts) CallbackHandler(n Notifier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.callback(w, r, n, nil)
	})
}

func (a *Accounts) callback(w http.ResponseWriter, r *http.Request, n Notifier, done func(Connection, error)) {
	q := r.URL.Query()
	state := q.Get("state")
	if e := q.Get("error"); e != "" {
		c, err := a.Cancel(state)
		if err == nil {
			a.notify(r.Context(), n, c.ChatKey, TextDeclined)
			err = fmt.Errorf("google: access not granted (%s)", e)
		}
		if done != nil {
			done(Connection{}, err)
		}
		page(w, http.StatusOK, "Google access was not granted", "Nothing changed. You can close this page.")
		return
	}
	c, err := a.Finish(r.Context(), state, q.Get("code"))
	if done != nil {
		done(c, err)
	}
	switch {
	case errors.Is(err, ErrUnknownState), errors.Is(err, ErrStateExpired):
		page(w, http.StatusBadRequest, "This link has expired or was already used",
			"Nothing was connected. Ask for a new link with /connect google in your chat.")
		return
	case err != nil:
		a.cfg.Logger.Error("google: connect failed", "user", c.UserKey, "err", err)
		page(w, http.StatusBadGateway, "Connecting your Google account failed",
			"Google did not accept the sign-in. Please try again with /connect google.")
		return
	}
	a.cfg.Logger.Info("google: account connected", "user", c.UserKey)
	told := a.notify(r.Context(), n, c.ChatKey, ConnectedText(c.Email))
	msg := "You can close this page and go back to the chat; your next message can use Google."
	if told {
		msg = "You can close this page; I've also said so in the chat."
	}
	page(w, http.StatusOK, "Your Google account is connected", msg)
}

func (a *Accounts) notify(ctx context.Context, n Notifier, chatKey, text string) bool {
	if n == nil || chatKey == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := n.Notify(ctx, chatKey, text); err != nil {
		a.cfg.Logger.Warn("google: could not tell the chat", "chat", chatKey, "err", err)
		return false
	}
	return true
}

func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>%[1]s</title><body style=\"font-family:sans-serif;max-width:32em;margin:4em auto\"><h1>%[1]s</h1><p>%[2]s</p>",
		html.EscapeString(title), html.EscapeString(text))
}

// LoginLoopback connects userKey from a terminal: it listens on a random
// port of 127.0.0.1, prints the consent link to out and waits until Google
// redirects the browser back (or ctx ends). Desktop ("installed") OAuth
// clients accept any loopback port.
func (a *Accounts) LoginLoopback(ctx context.Context, userKey string, out io.Writer) (Connection, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Connection{}, fmt.Errorf("google: loopback listener: %w", err)
	}
	redirect := "http://" + ln.Addr().String() + "/"
	link, err := a.start(userKey, "", redirect)
	if err != nil {
		ln.Close()
		return Connection{}, err
	}
	type result struct {
		c   Connection
		err error
	}
	results := make(chan result, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		a.callback(w, r, nil, func(c Connection, err error) {
			select {
			case results <- result{c, err}:
			default:
			}
		})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
	}()
	fmt.Fprintf(out, "Open this link in a browser on this machine and allow access for %s:\n\n%s\n\nWaiting for Google to send the browser back to %s …\n", userKey, link, redirect)
	for {
		select {
		case <-ctx.Done():
			return Connection{}, ctx.Err()
		case res := <-results:
			if errors.Is(res.err, ErrUnknownState) {
				continue // a stray request; keep waiting for the real one
			}
			return res.c, res.err
		}
	}
}
