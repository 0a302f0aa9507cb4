package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"loadout/tools"
)

type input struct {
	Action    string `json:"action" enum:"open,click,type,select,back,scroll,screenshot,close"`
	URL       string `json:"url,omitempty" desc:"open: the page (http or https)" reach:"url"`
	Ref       int    `json:"ref,omitempty" desc:"click, type, select: the element's number in the last page read"`
	Text      string `json:"text,omitempty" desc:"type: the text to enter"`
	Submit    bool   `json:"submit,omitempty" desc:"type: press Enter after the text, which submits its form"`
	Option    string `json:"option,omitempty" desc:"select: the option, by its text"`
	Direction string `json:"direction,omitempty" enum:"down,up" desc:"scroll: default down"`
}

// submits reports whether a type call presses Enter.
func (in input) submits() bool { return in.Submit || strings.HasSuffix(in.Text, "\n") }

// Tool returns the browser tool.
func (m *Manager) Tool() tools.Tool {
	return tools.New(tools.Definition{
		Name: "browser",
		Description: "Drive a web browser: open a page (its text after scripts ran, with links, buttons and fields numbered), " +
			"click, type or select by number, back, scroll, screenshot (saved to the chat's files), close. " +
			"For pages that need JavaScript or a form; use web fetch to just read a page.",
		Examples: []string{"open this page in a browser", "the page needs javascript", "fill in the form on this site",
			"take a screenshot of the website", "click the button on the page", "log in to the site and check", "book a table on the restaurant's site"},
		Untrusted: true, // every page is written by others
		EffectFor: tools.By(m.effect),
		Summarize: tools.By(m.summarize),
		Reaches:   tools.By(m.reaches),
		// A place among browser.max_browsers, chromium's start, the page.
		Timeout: 2*m.cfg.PageTimeout + startTimeout + 15*time.Second,
	}, m.run)
}

// form is what formJS tells of an element and its form.
type form struct {
	Found      bool       `json:"found"`
	Tag        string     `json:"tag"`
	Submits    bool       `json:"submits"`
	Risky      bool       `json:"risky"`
	Payment    bool       `json:"payment"`
	PayField   bool       `json:"payField"`
	Label      string     `json:"label"`
	Host       string     `json:"host"`
	Method     string     `json:"method"`
	Action     string     `json:"action"`
	ActionHost string     `json:"actionHost"`
	Fields     [][]string `json:"fields"`
	// More is how many fields past the first 20 the form sends.
	More int `json:"more"`
}

// sends reports whether acting on the element sends something: a form's
// data, or a press of a button that reads like buying.
func (f form) sends() bool { return f.Found && (f.Submits || f.Risky) }

// pays reports whether acting on the element pays or gives payment
// details: it sends a form with payment fields, or types into one (a
// page's script may read a field as it is typed).
func (f form) pays(in input) bool {
	return f.Found && (f.sends() && f.Payment || in.Action == "type" && f.PayField)
}

// inspect reads what in would act on, on the chat's page; the zero form
// when the call acts on no element or there is no page.
func (m *Manager) inspect(ctx context.Context, in input) form {
	if in.Action != "click" && in.Action != "type" && in.Action != "select" {
		return form{}
	}
	s, err := m.session(ctx, tools.CallerFrom(ctx).ChatKey, false)
	if err != nil || s == nil {
		return form{}
	}
	defer s.mu.Unlock()
	return m.formOf(s, in)
}

// formOf is inspect on s, held by the caller.
func (m *Manager) formOf(s *session, in input) form {
	typed := "null"
	if in.Action == "type" {
		b, _ := json.Marshal(strings.TrimSuffix(in.Text, "\n"))
		typed = string(b)
		if !in.submits() {
			// Typing alone sends nothing; only its form's fields matter.
			typed = "null"
		}
	}
	c, cancel := context.WithTimeout(s.inst.tab, 5*time.Second)
	defer cancel()
	f, err := chromedp.Run(c, chromedp.Evaluate[form](fmt.Sprintf(formJS, in.Ref, typed)))
	if err != nil {
		return form{}
	}
	if in.Action == "type" && !in.submits() {
		f.Submits = false
		f.Risky = false
	}
	if in.Action == "select" && !f.Submits {
		f.Risky = false
	}
	return f
}

// effect: reading, scrolling and screenshots change nothing; an action
// that submits a form (a submit button, Enter after typing, a list that
// submits on change) or presses a buy-like button is mutating; one on a
// page with payment fields is destructive, so it always asks.
func (m *Manager) effect(ctx context.Context, in input) tools.Effect {
	f := m.inspect(ctx, in)
	switch {
	case f.pays(in):
		return tools.EffectDestructive
	case f.sends():
		return tools.EffectMutate
	}
	return tools.EffectRead
}

// summarize says, for the person who approves it, where the action sends
// what: the page's host and the form's fields and values.
func (m *Manager) summarize(ctx context.Context, in input) string {
	switch in.Action {
	case "open":
		return "Open " + in.URL + " in the browser"
	case "back", "scroll", "screenshot", "close":
		return "Browser: " + in.Action
	}
	f := m.inspect(ctx, in)
	if in.Action == "type" && f.PayField && !f.sends() {
		return fmt.Sprintf("PAYMENT FORM. Type %s into the payment field %q on %s", lastFour(in.Text), f.Label, f.Host)
	}
	if !f.sends() {
		return fmt.Sprintf("Browser: %s element %d", in.Action, in.Ref)
	}
	var b strings.Builder
	if f.Payment {
		b.WriteString("PAYMENT FORM. ")
	}
	if f.Method != "" {
		fmt.Fprintf(&b, "Submit the form on %s (%s %s)", f.Host, f.Method, f.Action)
	} else {
		fmt.Fprintf(&b, "Press %q on %s", f.Label, f.Host)
	}
	if len(f.Fields) > 0 {
		b.WriteString(", sending ")
		for i, kv := range f.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%q", kv[0], kv[1])
		}
	}
	if f.More > 0 {
		fmt.Fprintf(&b, ", and %d more fields", f.More)
	}
	return b.String()
}

// reaches names the hosts a call connects to: the page's, and a form's
// action's.
func (m *Manager) reaches(ctx context.Context, in input) tools.Reach {
	f := m.inspect(ctx, in)
	var r tools.Reach
	for _, h := range []string{f.Host, f.ActionHost} {
		if h != "" && !slices.Contains(r.Hosts, h) {
			r.Hosts = append(r.Hosts, h)
		}
	}
	return r
}

// run carries out one call.
func (m *Manager) run(ctx context.Context, in input) (any, error) {
	chat := tools.CallerFrom(ctx).ChatKey
	switch in.Action {
	case "open":
		u, err := url.Parse(strings.TrimSpace(in.URL))
		if err != nil || in.URL == "" {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "open needs url, an http or https address"}
		}
		if err := m.deps.Guard.CheckURL(u); err != nil {
			return nil, &tools.Error{Code: "blocked_address", Message: err.Error(),
				Suggestion: "Only public web addresses can be reached. Tell the person if they need an internal one: the operator can allow it in web.allow_hosts."}
		}
		in.URL = u.String()
	case "close":
		s, err := m.session(ctx, chat, false)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return "No browser was open.", nil
		}
		m.endLocked(s)
		s.mu.Unlock()
		return "Closed the browser; its cookies and history are deleted.", nil
	case "click", "type", "select":
		if in.Ref < 1 {
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: in.Action + " needs ref, an element's number from the last page read"}
		}
	}
	s, err := m.session(ctx, chat, in.Action == "open")
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: "no page is open in this chat's browser", Suggestion: "open a page first"}
	}
	defer m.release(s)
	return m.act(ctx, s, in)
}

// act runs in on s's page, bounded by browser.page_timeout, and ends the
// browser when the page hangs or its renderer crashed.
func (m *Manager) act(ctx context.Context, s *session, in input) (any, error) {
	c, cancel := context.WithTimeout(s.inst.tab, m.cfg.PageTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	s.nav.arm(cancel)
	defer s.nav.arm(nil)
	out, err := m.do(c, ctx, s, in)
	if err == nil {
		return out, nil
	}
	var te *tools.Error
	if errors.As(err, &te) {
		return nil, err
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		return nil, &tools.Error{Code: tools.CodeUnavailable, Message: "the page could not be loaded: " + le.ErrorText +
			" (an address the web tools may not reach is refused too)"}
	}
	switch {
	case s.nav.hasCrashed():
		m.endLocked(s)
		return nil, &tools.Error{Code: tools.CodeUnavailable,
			Message:    "the page crashed the browser's renderer (it may have used more memory than browser.memory_mb allows); the chat's browser was closed",
			Suggestion: "try another page, or web fetch to read it without scripts"}
	case ctx.Err() != nil:
		m.endLocked(s)
		return nil, ctx.Err()
	case s.inst.gone():
		m.endLocked(s)
		return nil, &tools.Error{Code: tools.CodeUnavailable, Message: "the chat's browser ended unexpectedly; the next open starts a new one"}
	case c.Err() != nil:
		m.endLocked(s)
		return nil, &tools.Error{Code: tools.CodeTimeout,
			Message:    fmt.Sprintf("the page did not answer within %s (browser.page_timeout); the chat's browser was closed", m.cfg.PageTimeout),
			Suggestion: "try again later, or web fetch to read it without scripts"}
	}
	return nil, err
}

// do is act's work, on the page's context ctx, for the call's call.
func (m *Manager) do(ctx, call context.Context, s *session, in input) (any, error) {
	switch in.Action {
	case "open":
		err := s.nav.navigate(ctx, in.URL)
		if err != nil && ctx.Err() != nil && call.Err() == nil && !s.nav.hasCrashed() {
			// Still loading (a picture that never comes): what the page
			// shows may be enough. A page whose script hangs does not
			// answer this either.
			late, cancel := context.WithTimeout(s.inst.tab, 5*time.Second)
			defer cancel()
			s.nav.arm(cancel)
			chromedp.Do(late, chromedp.Stop())
			if out, rerr := m.read(late, s, fmt.Sprintf("(The page had not finished loading within %s; this is what it showed.)", m.cfg.PageTimeout)); rerr == nil {
				return out, nil
			}
		}
		if err != nil {
			return nil, err
		}
		return m.read(ctx, s, "")
	case "back":
		gen := s.nav.generation()
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`history.back()`, chromedp.EvalIgnoreExceptions)); err != nil && !errors.Is(err, chromedp.ErrJSUndefined) {
			return nil, err
		}
		if err := s.nav.settle(ctx, gen); err != nil {
			return nil, err
		}
		return m.read(ctx, s, "")
	case "scroll":
		dir := "1"
		if in.Direction == "up" {
			dir = "-1"
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(scrollJS, dir))); err != nil {
			return nil, err
		}
		return m.read(ctx, s, "")
	case "screenshot":
		return m.screenshot(ctx, call)
	}
	// click, type, select
	f := m.formOf(s, in)
	if f.pays(in) && tools.CallerFrom(call).Approved == "" {
		return nil, &tools.Error{Code: tools.CodePermission,
			Message: "this page asks for payment: its form is sent only once the person approves the call, and this one was not approved (tools.confirm_tools can make browser always ask)"}
	}
	text := in.Option
	if in.Action == "type" {
		text = strings.TrimSuffix(in.Text, "\n")
	}
	arg, _ := json.Marshal(text)
	gen := s.nav.generation()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(actJS, in.Ref, in.Action, arg, in.Action == "type" && in.submits())))
	if err != nil && !s.nav.since(gen) {
		return nil, err
	}
	switch got {
	case "gone":
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("element %d is not on the page (any more)", in.Ref),
			Suggestion: "use a number from the last page read"}
	case "not a field":
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("element %d is not a field to type into", in.Ref)}
	case "not a list":
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("element %d is not a list to select from", in.Ref)}
	case "no option":
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("element %d has no option %q", in.Ref, in.Option)}
	}
	if err := s.nav.settle(ctx, gen); err != nil {
		return nil, err
	}
	out, err := m.read(ctx, s, "")
	var te *tools.Error
	if err != nil && ctx.Err() == nil && !errors.As(err, &te) && s.nav.since(gen) {
		// A navigation slower than settle waits for replaced the page
		// as it was read: read the new one once it has loaded.
		if err := s.nav.loaded(ctx); err != nil {
			return nil, err
		}
		out, err = m.read(ctx, s, "")
	}
	return out, err
}

// snapshot is what snapshotJS returns.
type snapshot struct {
	Title string `json:"title"`
	URL   string `json:"url"`
	Text  string `json:"text"`
	Cut   bool   `json:"cut"`
	Refs  []struct {
		Ref     int      `json:"ref"`
		Tag     string   `json:"tag"`
		Type    string   `json:"type"`
		Label   string   `json:"label"`
		Name    string   `json:"name"`
		Href    string   `json:"href"`
		Value   *string  `json:"value"`
		Options []string `json:"options"`
	} `json:"refs"`
}

// read numbers the page's elements and returns its title, URL, text and
// elements. A document that is not http(s) (a file:, data: or chrome:
// page a link led to) is left for a blank one and refused.
func (m *Manager) read(ctx context.Context, s *session, note string) (string, error) {
	p, err := chromedp.Run(ctx, chromedp.Evaluate[snapshot](fmt.Sprintf(snapshotJS, m.cfg.MaxText, m.cfg.MaxElements), chromedp.EvalAwaitPromise))
	if err != nil {
		return "", err
	}
	if u, err := url.Parse(p.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		chromedp.Do(ctx, chromedp.Navigate("about:blank"))
		return "", &tools.Error{Code: tools.CodePermission, Message: "the browser opens only http and https pages; it was taken to " + schemeOf(p.URL) + " and left it"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Title: %s\nURL: %s\n", p.Title, p.URL)
	if note != "" {
		b.WriteString(note + "\n")
	}
	b.WriteString("\n")
	b.WriteString(strings.TrimSpace(p.Text))
	if p.Cut {
		fmt.Fprintf(&b, "\n[text cut at %d characters; scroll or ask for less]", m.cfg.MaxText)
	}
	if len(p.Refs) > 0 {
		b.WriteString("\n\nElements (use ref):\n")
	}
	for _, r := range p.Refs {
		kind := r.Tag
		switch {
		case r.Tag == "a":
			kind = "link"
		case r.Tag == "input" && (r.Type == "submit" || r.Type == "button" || r.Type == "image"):
			kind = "button"
		case r.Tag == "input":
			kind = "field"
			if r.Type != "" && r.Type != "text" {
				kind += " (" + r.Type + ")"
			}
		case r.Tag == "textarea":
			kind = "text area"
		case r.Tag == "select":
			kind = "list"
		}
		fmt.Fprintf(&b, "[%d] %s %q", r.Ref, kind, r.Label)
		if r.Name != "" && r.Tag != "a" && r.Tag != "button" {
			fmt.Fprintf(&b, " name=%s", r.Name)
		}
		if r.Value != nil && *r.Value != "" {
			fmt.Fprintf(&b, " value=%q", *r.Value)
		}
		if len(r.Options) > 0 {
			fmt.Fprintf(&b, " options: %s", strings.Join(r.Options, " | "))
		}
		if r.Href != "" {
			b.WriteString(" → " + r.Href)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// screenshot saves a PNG of what the page shows to the chat's files, and
// gives it to a model that reads images.
func (m *Manager) screenshot(ctx, call context.Context) (any, error) {
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, err
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	name := "screenshot-" + cleanName(hostOf(loc)) + "-" + time.Now().UTC().Format("20060102-150405") + ".png"
	if m.deps.Save == nil {
		return nil, &tools.Error{Code: tools.CodeUnavailable, Message: "screenshots are not kept here"}
	}
	saved, err := m.deps.Save(call, name, png)
	if err != nil {
		return nil, err
	}
	return tools.Media{Text: fmt.Sprintf("Saved a screenshot of %s as %s in the chat's files (%d KB).", loc, saved, len(png)>>10),
		Images: []tools.Image{{MIME: "image/png", Data: png}}}, nil
}

// lastFour shows a card number or code as a person checks it: its last
// four characters.
func lastFour(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= 4 {
		return "••••"
	}
	return "•••• " + s[len(s)-4:]
}

func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, strings.ToLower(s))
	if s == "" {
		return "page"
	}
	return s
}

func schemeOf(raw string) string {
	if i := strings.Index(raw, ":"); i > 0 && i < 12 {
		return "a " + raw[:i] + ": page"
	}
	return "another page"
}
