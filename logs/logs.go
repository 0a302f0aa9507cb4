// Package logs makes loadout's logger: text or JSON at a level, with
// every record passed through one filter that takes secrets out — the
// configured values, and anything shaped like a credential.
package logs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// shapes match credentials by their form, for those the config does not
// hold (a person's Google tokens) and for a configured one that shows up
// inside a longer text (a URL with a token in it). These are the ones of
// no channel; each channel declares its own (bridge.Declaration.Shapes).
func shapes() []string {
	return []string{
		`ya29\.[\w.-]+`,             // Google access token
		`1//[\w.-]{10,}`,            // Google refresh token
		`GOCSPX-[\w-]+`,             // Google client secret
		`\bsk-[\w-]{16,}`,           // OpenAI-style API key
		`(?i)bearer\s+[\w.~+/-]+=*`, // Authorization header
		`(?i)(access_token|refresh_token|client_secret|code_verifier|token)=[^&\s"]+`, // in a URL or form
	}
}

// Redactor removes secrets from text, as every log line is: the
// declared values and anything shaped like a credential. It is safe for
// concurrent use.
type Redactor struct {
	values []string // longest first, so a secret containing another goes whole
	shapes *regexp.Regexp
}

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("text" or "json"), with secrets and every string
// shaped like a credential — of no channel, or of extra (the channels'
// shapes, regular expressions in RE2 syntax) — replaced by [REDACTED] in
// every record. A shape that does not compile is a programming error:
// New panics.
func New(w io.Writer, level, format string, secrets, extra []string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // checked with the config
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(redactHandler{inner: h, r: NewRedactor(secrets, extra)})
}

// NewRedactor returns the Redactor of New's secrets and extra shapes. A
// secret shorter than six characters is not looked for: it would take
// common words out of every line.
func NewRedactor(secrets, extra []string) *Redactor {
	var vals []string
	for _, v := range secrets {
		if v = strings.TrimSpace(v); len(v) >= 6 && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	all := append(shapes(), extra...)
	return &Redactor{values: vals, shapes: regexp.MustCompile(strings.Join(all, "|"))}
}

const redacted = "[REDACTED]"

// Text is s with every secret and credential-shaped string replaced by
// [REDACTED] (a name=value keeps its name, a bearer header its word).
func (r *Redactor) Text(s string) string {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return r.shapes.ReplaceAllStringFunc(s, func(m string) string {
		if k, _, ok := strings.Cut(m, "="); ok && !strings.ContainsAny(k, " \t") {
			return k + "=" + redacted
		}
		if strings.HasPrefix(strings.ToLower(m), "bearer") {
			return "Bearer " + redacted
		}
		return redacted
	})
}

// attr redacts one attribute's value: strings, errors, anything printed
// through fmt, and groups.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.Text(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = r.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, r.Text(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, r.Text(x.String()))
		case []string:
			out := make([]string, len(x))
			for i, s := range x {
				out[i] = r.Text(s)
			}
			return slog.Any(a.Key, out)
		default:
			return slog.String(a.Key, r.Text(fmt.Sprint(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactHandler is the one place secrets are taken out of the log: every
// record, at every level, passes through it before it is written.
type redactHandler struct {
	inner slog.Handler
	r     *Redactor
	// attrs were given to WithAttrs after inner was made: they are
	// redacted and handed to inner only when a record is written, so a
	// logger made for each event (the delivery pipeline's) costs nothing
	// while the event logs nothing.
	attrs []slog.Attr
}

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.withAttrs().Handle(ctx, out)
}

// withAttrs is inner with h.attrs, redacted.
func (h redactHandler) withAttrs() slog.Handler {
	if len(h.attrs) == 0 {
		return h.inner
	}
	clean := make([]slog.Attr, len(h.attrs))
	for i, a := range h.attrs {
		clean[i] = h.r.attr(a)
	}
	return h.inner.WithAttrs(clean)
}

func (h redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	kept := slices.Grow(slices.Clip(h.attrs), len(attrs))
	for _, a := range attrs {
		// Resolved now, as a handler that wrote them at once would.
		kept = append(kept, slog.Attr{Key: a.Key, Value: a.Value.Resolve()})
	}
	return redactHandler{inner: h.inner, r: h.r, attrs: kept}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{inner: h.withAttrs().WithGroup(name), r: h.r}
}

// OpenFile opens a log file for appending, creating it and its directory
// (readable by the owner only, like the store).
func OpenFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}
