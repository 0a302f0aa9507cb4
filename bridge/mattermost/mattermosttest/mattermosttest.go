// Package mattermosttest is a fake Mattermost on 127.0.0.1: the REST API
// v4 and websocket (socket.go) a bot uses, files and button presses
// (actions.go). The bridgetest kit's Gate holds the bot's posts.
package mattermosttest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"loadout/bridge/bridgetest"
)

// Token is the bot's access token.
const Token = "bottoken0000000000000000x1"

// Bot is the bot's account.
var Bot = User{ID: ID("bot"), Name: "loadout"}

// ID is a Mattermost id (26 lowercase letters and digits) made from name.
func ID(name string) string { return (name + strings.Repeat("0", 26))[:26] }

// User is an account.
type User struct{ ID, Name string }

// File is a file of a post.
type File struct {
	Name, MIME string
	Content    []byte
}

// Post is a post as it stands now, in the API's JSON. Pending is the
// client's pending_post_id: a post created again with it is the first.
type Post struct {
	ID       string                      `json:"id"`
	Channel  string                      `json:"channel_id"`
	Root     string                      `json:"root_id"`
	User     string                      `json:"user_id"`
	Message  string                      `json:"message"`
	Pending  string                      `json:"pending_post_id"`
	CreateAt int64                       `json:"create_at"`
	FileIDs  []string                    `json:"file_ids"`
	Props    map[string]any              `json:"props"`
	Metadata map[string][]map[string]any `json:"metadata"` // files
	Files    []File                      `json:"-"`
}

// Server is the fake; its methods are safe for concurrent use.
type Server struct {
	URL string // the server's base: the channel's url

	srv  *httptest.Server
	gate bridgetest.Gate // holds the bot's new posts, key ""

	mu       sync.Mutex
	next     int
	last     int64
	users    map[string]User
	channels map[string]string // id → type (D, O)
	posts    []*Post
	byID     map[string]*Post
	files    map[string]File
	conns    map[*websocket.Conn]bool
	auths    int
}

// New starts a fake with the bot and people, closed when the test ends.
func New(t testing.TB, people ...User) *Server {
	s := &Server{users: map[string]User{Bot.ID: Bot}, channels: map[string]string{}, files: map[string]File{},
		conns: map[*websocket.Conn]bool{}, byID: map[string]*Post{}}
	for _, u := range people {
		s.users[u.ID] = u
	}
	mux := http.NewServeMux()
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /api/v4/users/{id}": s.user, "GET /api/v4/users/{id}/channels": s.listChannels,
		"POST /api/v4/users/{id}/typing": func(w http.ResponseWriter, r *http.Request) { reply(w, 200, nil) }, "POST /api/v4/posts": s.createPost,
		"PUT /api/v4/posts/{id}/patch":    s.patchPost,
		"GET /api/v4/channels/{id}/posts": s.channelPosts, "POST /api/v4/files": s.upload,
		"GET /api/v4/files/{id}": s.download, "GET /api/v4/websocket": s.socket,
	} {
		mux.Handle(pattern, s.authed(h))
	}
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(func() { s.Drop(); s.gate.Release(""); s.srv.CloseClientConnections(); s.srv.Close() })
	return s
}

// WaitFor waits until cond holds, checked at every change of the fake.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, "mattermosttest: "+what, &s.gate.Signal, cond)
}

func (s *Server) changed() { s.gate.Notify() }

func (s *Server) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v4/websocket" && r.Header.Get("Authorization") != "Bearer "+Token {
			fail(w, http.StatusUnauthorized, "api.context.session_expired.app_error")
			return
		}
		h(w, r)
	})
}

func fail(w http.ResponseWriter, status int, id string) {
	reply(w, status, map[string]any{"id": id, "message": "fake: " + id})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// id is a new id, and now a new time in ms later than any before; s.mu
// is held.
func (s *Server) id(kind string) string { s.next++; return ID(kind + strconv.Itoa(s.next) + "x") }
func (s *Server) now() int64            { s.last = max(s.last+1, time.Now().UnixMilli()); return s.last }

// DM is the direct message channel between the bot and user.
func (s *Server) DM(user string) string {
	id := ID("dm" + strings.TrimRight(user, "0"))
	s.Channel(id, "D")
	return id
}

// Channel adds a channel of type kind (D, G, O or P) with the bot in it.
func (s *Server) Channel(id, kind string) { s.mu.Lock(); s.channels[id] = kind; s.mu.Unlock() }

// Send is a person's post: stored, then its posted event goes to every
// open websocket. It returns the post's id.
func (s *Server) Send(p Post) string {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Metadata = map[string][]map[string]any{}
	for _, f := range p.Files {
		id := s.id("f")
		s.files[id], p.FileIDs = f, append(p.FileIDs, id)
		p.Metadata["files"] = append(p.Metadata["files"], map[string]any{"id": id, "name": f.Name, "mime_type": f.MIME, "size": len(f.Content)})
	}
	return s.add(&p)
}

// add stores a new post and sends its posted event; s.mu is held.
func (s *Server) add(p *Post) string {
	p.ID, p.CreateAt = s.id("p"), s.now()
	s.posts, s.byID[p.ID] = append(s.posts, p), p
	s.broadcast(p)
	return p.ID
}

// Redispatch sends post id's posted event again.
func (s *Server) Redispatch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byID[id]; p != nil {
		s.broadcast(p)
	}
}

// Sent returns the bot's posts in channel, as they stand now, in order.
func (s *Server) Sent(channel string) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Post
	for _, p := range s.posts {
		if p.User == Bot.ID && p.Channel == channel {
			out = append(out, *p)
		}
	}
	return out
}

// Hold lets the bot's next n new posts through and holds the rest until
// Release; a post abandoned while held is never created.
func (s *Server) Hold(n int)   { s.gate.Hold("", n) }
func (s *Server) Waiting() int { return s.gate.Waiting("") }
func (s *Server) Release()     { s.gate.Release("") }

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	u, ok := s.users[strings.Replace(r.PathValue("id"), "me", Bot.ID, 1)]
	s.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "store.sql_user.missing_account.const")
		return
	}
	reply(w, http.StatusOK, map[string]any{"id": u.ID, "username": u.Name})
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for id, kind := range s.channels {
		var last int64
		for _, p := range s.posts {
			if p.Channel == id {
				last = p.CreateAt
			}
		}
		out = append(out, map[string]any{"id": id, "type": kind, "last_post_at": last})
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) createPost(w http.ResponseWriter, r *http.Request) {
	var p Post
	if json.NewDecoder(r.Body).Decode(&p) != nil || p.Channel == "" {
		fail(w, http.StatusBadRequest, "api.context.invalid_body_param.app_error")
		return
	}
	if !s.gate.Pass(r.Context(), "") || r.Context().Err() != nil {
		return // abandoned by the bot while held: never created
	}
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channels[p.Channel] == "" {
		fail(w, http.StatusForbidden, "api.context.permissions.app_error")
		return
	}
	for _, q := range s.posts {
		if p.Pending != "" && q.Pending == p.Pending {
			reply(w, http.StatusCreated, q)
			return
		}
	}
	for _, id := range p.FileIDs {
		p.Files = append(p.Files, s.files[id])
	}
	p.User = Bot.ID
	s.add(&p)
	reply(w, http.StatusCreated, p)
}

func (s *Server) patchPost(w http.ResponseWriter, r *http.Request) {
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byID[r.PathValue("id")]
	if p == nil || p.User != Bot.ID {
		fail(w, http.StatusNotFound, "app.post.get.app_error")
		return
	}
	q := Post{Message: p.Message} // what the patch names replaces the post's
	json.NewDecoder(r.Body).Decode(&q)
	if p.Message = q.Message; q.Props != nil {
		p.Props = q.Props
	}
	reply(w, http.StatusOK, p)
}

// channelPosts lists a channel's posts after a post (after, page,
// per_page), or the latest (per_page).
func (s *Server) channelPosts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := slices.DeleteFunc(slices.Clone(s.posts), func(p *Post) bool { return p.Channel != r.PathValue("id") })
	page, _ := strconv.Atoi(q.Get("page"))
	per, _ := strconv.Atoi(q.Get("per_page"))
	per = cmp.Or(per, 60)
	if a := s.byID[q.Get("after")]; a != nil {
		in = slices.DeleteFunc(in, func(p *Post) bool { return p.CreateAt <= a.CreateAt })
		in = in[min(page*per, len(in)):min((page+1)*per, len(in))]
	} else {
		in = in[max(0, len(in)-per):]
	}
	order, posts := []string{}, map[string]any{}
	for i := len(in) - 1; i >= 0; i-- {
		order, posts[in[i].ID] = append(order, in[i].ID), in[i]
	}
	reply(w, http.StatusOK, map[string]any{"order": order, "posts": posts, "next_post_id": "", "prev_post_id": ""})
}
