package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/httpd"
	"loadout/tools/files"
)

//go:embed page
var page embed.FS

// pageTemplate is the chat page; it is parsed once per channel.
func pageTemplate() *template.Template {
	return template.Must(template.ParseFS(page, "page/chat.html"))
}

// contentPolicy is the page's Content-Security-Policy: its own script
// and style only, nothing inline, nothing framed.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"media-src 'self' blob:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Mount serves the chat under /chat on mux: the page, its script and
// style, and the endpoints the page calls. Every one answers only a
// signed-in person, and only about their own chat.
func (c *Chat) Mount(mux *http.ServeMux) {
	tmpl := pageTemplate()
	mux.HandleFunc("GET /chat", c.signedIn(func(w http.ResponseWriter, r *http.Request, user string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var b strings.Builder
		if err := tmpl.Execute(&b, struct{ User, CSRF string }{user, c.web.CSRFToken(r)}); err != nil {
			c.log.Error("webui: the chat page did not render", "err", err)
			http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, b.String())
	}))
	mux.HandleFunc("GET /chat/static/{name}", c.signedIn(c.static))
	mux.HandleFunc("POST /chat/send", c.signedIn(c.uploads(c.changes(c.send))))
	mux.HandleFunc("POST /chat/answer", c.signedIn(c.changes(c.answer)))
	mux.HandleFunc("GET /chat/stream", c.signedIn(c.stream))
	mux.HandleFunc("GET /chat/file", c.signedIn(c.file))
}

// signedIn runs h for a signed-in person with their user key; anyone
// else is refused (the page sends them to sign in), and a person the
// channel they came from no longer lets in is told so.
func (c *Chat) signedIn(h func(w http.ResponseWriter, r *http.Request, user string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		page := r.Method == http.MethodGet && r.URL.Path == "/chat"
		user, _, err := c.web.Viewer(r)
		switch {
		case errors.Is(err, bridge.ErrNotAdmitted):
			if page {
				http.Error(w, bridge.TextNotAdmitted, http.StatusForbidden)
				return
			}
			plain(w, http.StatusForbidden, bridge.TextNotAdmitted)
			return
		case err == nil && user != "":
			h(w, r, user)
			return
		case err != nil && !errors.Is(err, bridge.ErrSignedOut):
			c.log.Error("webui: cannot tell who is signed in", "path", r.URL.Path, "err", err)
			plain(w, http.StatusServiceUnavailable, "I couldn't check who you are just now; nothing was done. Try again in a moment.")
			return
		}
		if page {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		plain(w, http.StatusUnauthorized, "Sign in first.")
	}
}

// changes refuses a request that changes something without the
// session's CSRF token.
func (c *Chat) changes(h func(w http.ResponseWriter, r *http.Request, user string)) func(w http.ResponseWriter, r *http.Request, user string) {
	return func(w http.ResponseWriter, r *http.Request, user string) {
		if !c.web.CheckCSRF(r) {
			c.log.Warn("webui: refused a request without this session's CSRF token", "path", r.URL.Path, "user", user)
			plain(w, http.StatusForbidden, "This page is out of date or came from elsewhere: reload the chat and try again.")
			return
		}
		h(w, r, user)
	}
}

// uploads lets a request carry a message's files: up to
// webui.max_upload_mb (and a little for its text), arriving within
// uploadTime. It comes before the CSRF check, which may read the body.
func (c *Chat) uploads(h func(w http.ResponseWriter, r *http.Request, user string)) func(w http.ResponseWriter, r *http.Request, user string) {
	return func(w http.ResponseWriter, r *http.Request, user string) {
		httpd.AllowBody(w, r, int64(c.cfg.MaxUploadMB)<<20+maxText+64<<10, uploadTime)
		h(w, r, user)
	}
}

// secure sets the headers every answer of the chat carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// plain answers with a sentence for the person, as JSON the page shows.
func plain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"ok": status < 300, "message": text})
}

func (c *Chat) static(w http.ResponseWriter, r *http.Request, _ string) {
	name := r.PathValue("name")
	var ctype string
	switch name {
	case "chat.js":
		ctype = "text/javascript; charset=utf-8"
	case "chat.css":
		ctype = "text/css; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	b, err := page.ReadFile("page/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(b)
}

// clientID is the id the page gives a message so a retried request is
// answered once: 8 to 64 letters, digits, '-' or '_'.
func clientID(s string) (string, bool) {
	if len(s) < 8 || len(s) > 64 {
		return "", false
	}
	for _, ch := range s {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			return "", false
		}
	}
	return s, true
}

// eventID is the inbox id of a person's request: their user key and the
// page's id, so two people's pages never collide.
func eventID(user, verb, id string) string { return verb + ":" + user + "/" + id }

// maxText caps a message typed on the page, in bytes.
const maxText = 64 << 10

// uploadTime is how long an upload may take to arrive.
const uploadTime = 10 * time.Minute

// send takes a message from the page: its text, files and voice
// recording, stored in the inbox before the answer 202. A message sent
// again with the same id is taken once.
func (c *Chat) send(w http.ResponseWriter, r *http.Request, user string) {
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		if errors.Is(err, http.ErrNotMultipart) {
			err = r.ParseForm()
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			plain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("That is more than I take in one message: files up to %d MB (webui.max_upload_mb).", c.cfg.MaxUploadMB))
			return
		case err != nil:
			plain(w, http.StatusBadRequest, "The message could not be read: send it again.")
			return
		}
	}
	if r.MultipartForm != nil {
		defer r.MultipartForm.RemoveAll()
	}
	id, ok := clientID(r.FormValue("id"))
	if !ok {
		plain(w, http.StatusBadRequest, "The message has no valid id (field id: 8 to 64 letters, digits, - or _): reload the chat.")
		return
	}
	text := strings.TrimSpace(r.FormValue("text"))
	if len(text) > maxText {
		plain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The message is too long: at most %d KB of text.", maxText>>10))
		return
	}
	var attached, voice []*multipart.FileHeader
	if r.MultipartForm != nil {
		attached, voice = r.MultipartForm.File["file"], r.MultipartForm.File["voice"]
	}
	if text == "" && len(attached) == 0 && len(voice) == 0 {
		plain(w, http.StatusBadRequest, "The message is empty: type something, attach a file or record your voice.")
		return
	}
	if len(voice) > 1 || (len(voice) == 1 && len(attached) > 0) {
		plain(w, http.StatusBadRequest, "Send a voice recording on its own, one at a time.")
		return
	}
	key := ChatKey(user)
	pend := bridge.Pending{ID: eventID(user, "send", id), Route: c.routes.Encode(route{User: user}),
		Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: text}}
	// The files are kept once: a message sent again is not.
	switch seen, err := c.pipe.Seen(r.Context(), pend.ID); {
	case err != nil:
		c.log.Error("webui: could not check a message against the inbox", "err", err)
		plain(w, http.StatusServiceUnavailable, bridge.TextNotSaved)
		return
	case seen:
		plain(w, http.StatusAccepted, "")
		return
	}
	you := event{Kind: kindYou, Text: text}
	if len(voice) == 1 {
		note, reply := c.keepVoice(r.Context(), key, voice[0])
		if reply != "" {
			pend.Reply = reply
		}
		pend.Voice = note
		if note != nil {
			you.Voice = note.File
		} else if you.Text == "" {
			you.Text = "(voice message)"
		}
	}
	var notes []string
	for _, fh := range attached {
		note, saved, image := c.keepFile(r.Context(), key, fh)
		notes = append(notes, note)
		if saved != "" {
			you.Files = append(you.Files, saved)
		}
		if image {
			pend.Inbound.Images = append(pend.Inbound.Images, saved)
		}
	}
	if len(notes) > 0 {
		pend.Inbound.Text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + text)
	}
	c.accept(w, r, pend, you)
}

// accept stores pend, shows what the person did (you), and answers the
// page. A message is shown before it is stored, so that it comes before
// its answer on the page; if it is not stored after all (or was stored
// already), the page is told to take it back.
func (c *Chat) accept(w http.ResponseWriter, r *http.Request, pend bridge.Pending, you event) {
	ctx := context.WithoutCancel(r.Context())
	key := pend.Inbound.ChatKey
	var shown int64
	if you.Kind == kindYou {
		id, err := c.rooms.add(ctx, key, you)
		if err != nil {
			c.log.Warn("webui: the page's history could not show a message", "err", err)
		}
		shown = id
	}
	fresh, err := c.pipe.Accept(r.Context(), pend)
	if shown != 0 && (err != nil || !fresh) {
		if err := c.rooms.append(ctx, key, event{Kind: kindUnsent, Ref: strconv.FormatInt(shown, 10)}); err != nil {
			c.log.Warn("webui: the page's history could not take back a message", "err", err)
		}
	}
	switch {
	case errors.Is(err, bridge.ErrStopped):
		plain(w, http.StatusServiceUnavailable, "I'm restarting: send it again in a moment.")
		return
	case err != nil:
		c.log.Error("webui: a message was not stored", "err", err)
		plain(w, http.StatusServiceUnavailable, bridge.TextNotSaved)
		return
	}
	if fresh && you.Kind == kindClosed {
		if err := c.rooms.append(ctx, key, you); err != nil {
			c.log.Warn("webui: the page's history could not show a press", "err", err)
		}
	}
	plain(w, http.StatusAccepted, "")
}

// keepFile keeps a file the person attached in the chat's files and
// returns the note the model reads about it, its kept name and whether
// it is a picture (which a model that reads images sees, llm.vision).
func (c *Chat) keepFile(ctx context.Context, key string, fh *multipart.FileHeader) (note, saved string, image bool) {
	name := path.Base(strings.ReplaceAll(fh.Filename, `\`, "/"))
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	if c.cfg.Files == nil {
		return bridge.FileNotKept(name, "files are not kept in this setup"), "", false
	}
	f, err := fh.Open()
	if err != nil {
		return bridge.FileNotKept(name, "it could not be read"), "", false
	}
	defer f.Close()
	saved, n, err := c.cfg.Files.Save(ctx, key, name, f)
	if err != nil {
		c.log.Warn("webui: could not keep a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, err.Error()), "", false
	}
	ctype := fh.Header.Get("Content-Type")
	if t, _, err := mime.ParseMediaType(ctype); err != nil || t == "" {
		ctype = "application/octet-stream"
	} else {
		ctype = t
	}
	return bridge.FileNote(saved, ctype, n), saved, files.IsImage(ctype)
}

// keepVoice keeps a recording made on the page as a voice note, or
// returns the sentence that answers it.
func (c *Chat) keepVoice(ctx context.Context, key string, fh *multipart.FileHeader) (*bridge.VoiceNote, string) {
	reply, ok := c.pipe.VoiceRefusal(key, fh.Size, 0)
	switch {
	case !ok:
		return nil, bridge.TextVoiceOff
	case reply != "":
		return nil, reply
	}
	name := "voice.webm"
	if t, _, _ := mime.ParseMediaType(fh.Header.Get("Content-Type")); strings.Contains(t, "ogg") {
		name = "voice.ogg"
	}
	return c.pipe.KeepVoice(ctx, c.cfg.Files, key, name, 0, int64(c.cfg.MaxUploadMB)<<20,
		func(context.Context) (io.ReadCloser, error) { return fh.Open() })
}

// answer takes a press of Approve or Deny: only the person asked, in
// their own chat, while the request waits (checked as every channel
// checks a press), and once per press.
func (c *Chat) answer(w http.ResponseWriter, r *http.Request, user string) {
	id, ok := clientID(r.FormValue("id"))
	approval := r.FormValue("approval")
	choice := r.FormValue("choice")
	switch {
	case !ok:
		plain(w, http.StatusBadRequest, "The press has no valid id (field id): reload the chat.")
		return
	case approval == "" || len(approval) > 128:
		plain(w, http.StatusBadRequest, "Which request? (field approval)")
		return
	case choice != "approve" && choice != "deny" && choice != "always":
		plain(w, http.StatusBadRequest, `Approve or deny? (field choice: "approve", "deny" or "always")`)
		return
	}
	key := ChatKey(user)
	can, err := c.router.Answerable(r.Context(), key, user, approval)
	if err != nil {
		c.log.Error("webui: could not check a button press", "err", err)
		plain(w, http.StatusServiceUnavailable, "Sorry, I could not check that request just now. Please press again in a moment.")
		return
	}
	if !can.OK {
		if can.Ended {
			c.rooms.append(r.Context(), key, event{Kind: kindClosed, Approval: approval, Text: can.Why})
		}
		plain(w, http.StatusConflict, can.Why)
		return
	}
	pend := bridge.Pending{ID: eventID(user, "press", id), Route: c.routes.Encode(route{User: user}),
		Inbound: chat.Inbound{ChatKey: key, UserKey: user, Text: "/" + choice + " " + approval}}
	chose := "Approve"
	switch choice {
	case "deny":
		chose = "Deny"
	case "always":
		chose = "Always allow"
	}
	c.accept(w, r, pend, event{Kind: kindClosed, Approval: approval, Text: "You chose: " + chose + "."})
}

// file sends a file of the person's own chat: as an attachment, or, for
// a recording (?play=1), as audio the page plays.
func (c *Chat) file(w http.ResponseWriter, r *http.Request, user string) {
	op, ok := c.cfg.Files.(FileOpener)
	name := r.URL.Query().Get("name")
	if !ok || name == "" || len(name) > 255 {
		http.NotFound(w, r)
		return
	}
	f, err := op.Open(ChatKey(user), name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.NotFound(w, r)
		return
	}
	// Never served as a page of this site: a file could be HTML.
	ctype := "application/octet-stream"
	if r.URL.Query().Get("play") == "1" {
		switch strings.ToLower(path.Ext(name)) {
		case ".ogg", ".oga", ".opus":
			ctype = "audio/ogg"
		case ".webm":
			ctype = "audio/webm"
		}
	}
	w.Header().Set("Content-Type", ctype)
	if ctype == "application/octet-stream" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
}
