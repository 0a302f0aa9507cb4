package ui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

// Limits of the pages: what one page lists at most.
const (
	chatsPerPage   = 50
	messagesShown  = 200
	approvalsShown = 50
	eventsShown    = 20
	tasksShown     = 100
	memoriesShown  = 200
	peopleShown    = 200
	maxKeyLen      = 200
	maxQueryLen    = 200
)

// Mount serves the console on mux. Only /login (with its stylesheet)
// and /signin answer a request without a session.
func (c *Console) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /login", c.headers(c.loginPage))
	mux.HandleFunc("POST /login", c.headers(c.login))
	mux.HandleFunc("GET /signin", c.headers(c.signinPage))
	mux.HandleFunc("POST /signin", c.headers(c.signin))
	mux.HandleFunc("GET /login/style.css", c.headers(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		http.ServeFileFS(w, r, c.static, "style.css")
	}))
	mux.HandleFunc("GET /{$}", c.page(c.home))
	mux.HandleFunc("GET /chats", c.page(c.chats))
	mux.HandleFunc("GET /conversation", c.page(c.conversation))
	mux.HandleFunc("GET /approvals", c.page(c.approvals))
	mux.HandleFunc("GET /people", c.page(c.operator(c.people)))
	mux.HandleFunc("GET /person", c.page(c.person))
	mux.HandleFunc("GET /tools", c.page(c.operator(c.tools)))
	mux.HandleFunc("GET /config", c.page(c.operator(c.settings)))
	mux.HandleFunc("POST /logout", c.action(c.logout))
	mux.HandleFunc("POST /approvals/decide", c.action(c.decide))
	mux.HandleFunc("POST /events/retry", c.action(c.operator(c.retry)))
	mux.HandleFunc("POST /events/drop", c.action(c.operator(c.drop)))
	mux.HandleFunc("POST /tasks/act", c.action(c.taskAct))
	mux.HandleFunc("POST /memories/delete", c.action(c.forget))
	mux.HandleFunc("POST /google/revoke", c.action(c.revoke))
	mux.HandleFunc("POST /sessions/revoke", c.action(c.signOutEverywhere))
}

// csp allows the console's own stylesheet and nothing else: no script,
// no frame, no form posted elsewhere.
const csp = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// headers adds the security headers every answer of the console carries.
func (c *Console) headers(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		// A /signin link's token must never leave in a Referer; within
		// the site the browser then sends Origin, which actions check
		// (with no-referrer it would send "null").
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// page serves a page to a signed-in viewer; anyone else is sent to
// /login.
func (c *Console) page(h handlerFunc) http.HandlerFunc {
	return c.headers(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.session(r)
		if errors.Is(err, errNoSession) {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if c.ended(w, r, err) {
			return
		}
		if err != nil {
			c.fail(w, r, viewer{}, err)
			return
		}
		if err := h(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)), v); err != nil {
			c.fail(w, r, v, err)
		}
	})
}

// action serves a state-changing request: a session and its CSRF token
// are required, or nothing happens.
func (c *Console) action(h handlerFunc) http.HandlerFunc {
	return c.headers(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.session(r)
		if errors.Is(err, errNoSession) {
			c.plain(w, r, http.StatusForbidden, viewer{}, "You are not signed in, so nothing was done.")
			return
		}
		if c.ended(w, r, err) {
			return
		}
		if err != nil {
			c.fail(w, r, viewer{}, err)
			return
		}
		if !c.csrfOK(r, v) {
			c.log.Warn("ui: refused a request without its session's CSRF token", "user", v.UserKey, "path", r.URL.Path, "remote", remote(r))
			c.plain(w, r, http.StatusForbidden, v, "This request did not come from a page of this session, so nothing was done. Reload the page and try again.")
			return
		}
		if err := h(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)), v); err != nil {
			c.fail(w, r, v, err)
		}
	})
}

// ended answers a request whose person their channel no longer lets
// in (err is bridge.ErrNotAdmitted): the sentence, and the cookie of the
// session that ended is dropped. It reports whether it answered.
func (c *Console) ended(w http.ResponseWriter, r *http.Request, err error) bool {
	if !errors.Is(err, bridge.ErrNotAdmitted) {
		return false
	}
	c.clearCookie(w)
	c.plain(w, r, http.StatusForbidden, viewer{}, bridge.TextNotAdmitted)
	return true
}

// errForbidden and errMissing end a request with 403 and 404.
var (
	errForbidden = errors.New("ui: forbidden")
	errMissing   = errors.New("ui: not found")
)

// badInput is a request's invalid parameter: 400 with its sentence.
type badInput struct{ msg string }

func (e badInput) Error() string { return e.msg }

func bad(format string, a ...any) error { return badInput{fmt.Sprintf(format, a...)} }

// operator lets only the operator through; a person gets 403.
func (c *Console) operator(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v viewer) error {
		if !v.Admin {
			return errForbidden
		}
		return h(w, r, v)
	}
}

// fail answers an error: a plain sentence for the person, the error in
// the log under a short reference.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v viewer, err error) {
	var b badInput
	switch {
	case errors.As(err, &b):
		c.plain(w, r, http.StatusBadRequest, v, b.msg)
	case errors.Is(err, errForbidden):
		c.log.Warn("ui: refused", "user", v.UserKey, "path", r.URL.Path, "query", r.URL.RawQuery)
		c.plain(w, r, http.StatusForbidden, v, "This page is not yours to see.")
	case errors.Is(err, errMissing), errors.Is(err, chat.ErrNotFound):
		c.plain(w, r, http.StatusNotFound, v, "There is nothing here.")
	case errors.Is(err, errUnsure):
		c.log.Warn("ui: refused a request: the person's channel cannot tell now whether it lets them in", "path", r.URL.Path, "err", err)
		c.plain(w, r, http.StatusServiceUnavailable, v, "I can't confirm just now that the chat app you came from still lets you in, so nothing was done. Try again in a moment.")
	default:
		ref := ref()
		c.log.Error("ui: page failed", "ref", ref, "path", r.URL.Path, "err", err)
		c.plain(w, r, http.StatusInternalServerError, v, "Something went wrong on the server (reference "+ref+").")
	}
}

func ref() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *Console) plain(w http.ResponseWriter, r *http.Request, status int, v viewer, msg string) {
	c.render(w, r, status, "message", v, map[string]any{"Message": msg})
}

// render writes page name with data.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v viewer, data map[string]any) {
	t := c.pages[name]
	data["V"] = v
	data["Signed"] = v.UserKey != ""
	data["Path"] = r.URL.Path
	if n, ok := notices[r.URL.Query().Get("done")]; ok {
		data["Notice"] = n
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", data); err != nil {
		c.log.Error("ui: template", "page", name, "err", err)
		http.Error(w, "Something went wrong on the server.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

// notices are the fixed sentences an action's redirect shows (never text
// from the request).
var notices = map[string]string{
	"sent":      "Your answer was sent to the chat; the chat shows what happened.",
	"already":   "That request was already answered.",
	"retried":   "The event is back in line; its channel tries it again shortly.",
	"dropped":   "The event was dropped.",
	"paused":    "The task is paused.",
	"resumed":   "The task is scheduled again.",
	"ran":       "The task was handed to its chat.",
	"deleted":   "Deleted.",
	"revoked":   "The Google account is disconnected.",
	"notfound":  "That was already gone.",
	"signedout": "Every browser signed in as that person is signed out.",
}

// back is where an action returns: the form's local path, else fallback.
func back(r *http.Request, fallback, done string) string {
	to := r.PostFormValue("back")
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.ContainsAny(to, "\\\r\n") || len(to) > 500 {
		to = fallback
	}
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	return to + sep + "done=" + done
}

// key reads a chat or user key parameter.
func key(r *http.Request, name string, form bool) (string, error) {
	v := r.URL.Query().Get(name)
	if form {
		v = r.PostFormValue(name)
	}
	switch {
	case v == "":
		return "", bad("The parameter %q is missing.", name)
	case len(v) > maxKeyLen || !utf8.ValidString(v) || !strings.Contains(v, ":"):
		return "", bad("The parameter %q must be a key such as telegram:42.", name)
	}
	return v, nil
}

// id reads a positive number parameter of a form.
func id(r *http.Request, name string) (int64, error) {
	n, err := strconv.ParseInt(r.PostFormValue(name), 10, 64)
	if err != nil || n <= 0 {
		return 0, bad("The parameter %q must be a positive number.", name)
	}
	return n, nil
}

// home is the overview for the operator and a person's own page for a
// person.
func (c *Console) home(w http.ResponseWriter, r *http.Request, v viewer) error {
	if !v.Admin {
		return c.personPage(w, r, v, v.UserKey)
	}
	ctx := r.Context()
	var st Status
	if c.d.Status != nil {
		st = c.d.Status(ctx)
	}
	stats, err := c.d.Store.InboxStats(ctx)
	if err != nil {
		return err
	}
	events, err := c.d.Store.Quarantined(ctx, eventsShown)
	if err != nil {
		return err
	}
	chats, err := c.d.Store.ChatCount(ctx)
	if err != nil {
		return err
	}
	pending, err := c.d.Store.Approvals(ctx, "", true, approvalsShown)
	if err != nil {
		return err
	}
	now := c.now().UTC()
	traffic, err := c.d.Store.Traffic(ctx, now.Truncate(24*time.Hour).AddDate(0, 0, -29))
	if err != nil {
		return err
	}
	day, month := charts(traffic, now)
	c.render(w, r, http.StatusOK, "overview", v, map[string]any{
		"Status": st, "Stats": stats, "Events": events, "Chats": chats, "Pending": len(pending),
		"DayMessages": day.messages, "DayTokens": day.tokens, "MonthMessages": month.messages, "MonthTokens": month.tokens,
	})
	return nil
}

// chatRow is a chat as the list shows it.
type chatRow struct {
	Chat
	Age  string
	Cost string
}

func (c *Console) rows(chats []Chat) []chatRow {
	out := make([]chatRow, len(chats))
	for i, ch := range chats {
		out[i] = chatRow{Chat: ch, Age: age(c.now().Sub(ch.OpenedAt))}
		if c.d.Cost != nil {
			if s, ok := c.d.Cost(ch.PromptTokens, ch.CompletionTokens); ok {
				out[i].Cost = s
			}
		}
	}
	return out
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// chats lists the chats, a page at a time: every chat for the operator,
// a person's own for them.
func (c *Console) chats(w http.ResponseWriter, r *http.Request, v viewer) error {
	after := r.URL.Query().Get("after")
	if len(after) > maxKeyLen || !utf8.ValidString(after) {
		return bad("The parameter \"after\" must be a chat key.")
	}
	user := ""
	if !v.Admin {
		user = v.UserKey
	}
	list, err := c.d.Store.Chats(r.Context(), user, after, chatsPerPage)
	if err != nil {
		return err
	}
	next := ""
	if len(list) == chatsPerPage {
		next = list[len(list)-1].ChatKey
	}
	c.render(w, r, http.StatusOK, "chats", v, map[string]any{"Chats": c.rows(list), "Next": next, "Priced": c.d.Cost != nil})
	return nil
}

// approvals lists the pending approvals and the recent decisions: the
// person's own, or everyone's for the operator. Only the person asked
// may answer.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, v viewer) error {
	user := ""
	if !v.Admin {
		user = v.UserKey
	}
	pending, err := c.d.Store.Approvals(r.Context(), user, true, approvalsShown)
	if err != nil {
		return err
	}
	decided, err := c.d.Store.Approvals(r.Context(), user, false, approvalsShown)
	if err != nil {
		return err
	}
	trail, err := c.d.Store.AuditLog(r.Context(), "", user, approvalsShown)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "approvals", v, map[string]any{"Pending": pending, "Decided": decided, "Trail": trail})
	return nil
}

// decide answers an approval from the page: the answer goes to the chat
// as the person's /approve or /deny, so it is bound exactly as there
// (only the person asked, once, not after it expired), and the chat
// shows what happened.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, v viewer) error {
	aid := r.PostFormValue("id")
	if aid == "" || len(aid) > 64 || strings.Trim(aid, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return bad("The parameter \"id\" must be an approval's id.")
	}
	answer := r.PostFormValue("answer")
	if answer != "approve" && answer != "deny" {
		return bad("The parameter \"answer\" must be approve or deny.")
	}
	a, err := c.d.Store.ApprovalByID(r.Context(), aid)
	if err != nil {
		return err
	}
	if a.UserKey != v.UserKey {
		c.log.Warn("ui: refused an answer to someone else's approval", "user", v.UserKey, "approval", a.ID)
		c.plain(w, r, http.StatusForbidden, v, "Only the person who asked can answer this.")
		return nil
	}
	if a.Status != chat.ApprovalPending {
		http.Redirect(w, r, back(r, "/approvals", "already"), http.StatusSeeOther)
		return nil
	}
	// One event per approval, whichever the answer: a second press (or
	// the other button) is the same event, which the inbox takes once.
	if err := c.d.Chats.Tell(r.Context(), a.ChatKey, a.UserKey, "web-answer:"+a.ID, "/"+answer+" "+a.ID); err != nil {
		c.log.Warn("ui: an answer from the page did not reach its chat", "approval", a.ID, "chat", a.ChatKey, "err", err)
		c.plain(w, r, http.StatusServiceUnavailable, v, "Your answer could not reach the chat: its channel is not running here now. Nothing was decided; answer in the chat instead.")
		return nil
	}
	c.log.Info("ui: approval answered from the page", "user", v.UserKey, "approval", a.ID, "answer", answer)
	http.Redirect(w, r, back(r, "/approvals", "sent"), http.StatusSeeOther)
	return nil
}

func (c *Console) retry(w http.ResponseWriter, r *http.Request, v viewer) error {
	seq, err := id(r, "seq")
	if err != nil {
		return err
	}
	ok, err := c.d.Store.RetryEvent(r.Context(), seq)
	if err != nil {
		return err
	}
	c.log.Info("ui: quarantined event retried", "user", v.UserKey, "seq", seq, "changed", ok)
	http.Redirect(w, r, back(r, "/", map[bool]string{true: "retried", false: "notfound"}[ok]), http.StatusSeeOther)
	return nil
}

func (c *Console) drop(w http.ResponseWriter, r *http.Request, v viewer) error {
	seq, err := id(r, "seq")
	if err != nil {
		return err
	}
	ok, err := c.d.Store.DropEvent(r.Context(), seq)
	if err != nil {
		return err
	}
	c.log.Info("ui: quarantined event dropped", "user", v.UserKey, "seq", seq, "changed", ok)
	http.Redirect(w, r, back(r, "/", map[bool]string{true: "dropped", false: "notfound"}[ok]), http.StatusSeeOther)
	return nil
}

// people lists the channels' allowed people and who wrote.
func (c *Console) people(w http.ResponseWriter, r *http.Request, v viewer) error {
	var st Status
	if c.d.Status != nil {
		st = c.d.Status(r.Context())
	}
	people, err := c.d.Store.People(r.Context(), peopleShown)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "people", v, map[string]any{"Channels": st.Channels, "People": people})
	return nil
}

// groupRow is a group as the tools page shows it.
type groupRow struct {
	Name, Description string
	Tools             []string
	Tokens            int
}

// tools lists the groups, their tools and schema tokens, the MCP
// servers, and runs find_tools on the query box's words.
func (c *Console) tools(w http.ResponseWriter, r *http.Request, v viewer) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > maxQueryLen || !utf8.ValidString(q) {
		return bad("The query must be at most %d characters.", maxQueryLen)
	}
	reg := c.d.Registry
	var groups []groupRow
	core := reg.Core(nil)
	var coreNames []string
	for _, d := range core {
		coreNames = append(coreNames, d.Name)
	}
	groups = append(groups, groupRow{Name: "core", Description: "always offered", Tools: coreNames, Tokens: tools.SchemaTokens(core, c.d.Count)})
	for _, g := range reg.Groups() {
		defs := reg.GroupTools(g.Name, nil)
		var names []string
		for _, d := range defs {
			names = append(names, d.Name)
		}
		groups = append(groups, groupRow{Name: g.Name, Description: g.Description, Tools: names, Tokens: tools.SchemaTokens(defs, c.d.Count)})
	}
	data := map[string]any{"Groups": groups, "Query": q}
	if c.d.Status != nil {
		data["Servers"] = c.d.Status(r.Context()).Servers
	}
	if q != "" {
		data["Found"] = c.find(r.Context(), q)
	}
	c.render(w, r, http.StatusOK, "tools", v, data)
	return nil
}

// find runs the registry's find_tools for the operator.
func (c *Console) find(ctx context.Context, q string) string {
	t, ok := c.d.Registry.Tool(tools.FindToolsName)
	if !ok {
		return "find_tools is not registered."
	}
	args, _ := json.Marshal(map[string]string{"query": q})
	in, err := t.Decode(args)
	if err != nil {
		return err.Error()
	}
	out, err := t.Run(tools.WithCaller(ctx, tools.Caller{ChatKey: OperatorKey, UserKey: OperatorKey}), in)
	var te *tools.Error
	switch {
	case errors.As(err, &te):
		return te.Message
	case err != nil:
		return "find_tools failed."
	}
	if s, ok := out.(string); ok {
		return s
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return string(b)
}

// settings shows the effective configuration.
func (c *Console) settings(w http.ResponseWriter, r *http.Request, v viewer) error {
	var s []Setting
	if c.d.Settings != nil {
		s = c.d.Settings()
	}
	c.render(w, r, http.StatusOK, "config", v, map[string]any{"Settings": s})
	return nil
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"code":      chat.CodeOf,
		"join":      strings.Join,
		"thousands": func(n int64) string { return tools.Thousands(int(n)) },
		"add":       func(a, b int64) int64 { return a + b },
	}
	layout, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
