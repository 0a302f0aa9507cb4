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
var Bot = User{ID: ID("loadout"), Name: "loadout"}

// ID is a Mattermost id (26 lowercase letters and digits) made from a
// name: the user with it has that name.
func ID(name string) string { return (name + strings.Repeat("0", 26))[:26] }

// User is an account: its id is ID(Name).
type User struct{ ID, Name string }

func nameOf(id string) string { return strings.TrimRight(id, "0") }

// File is a file of a post.
type File struct {
	Name, MIME string
	Content    []byte
}

// Post is a post in the API's JSON. A post created again with the same
// Pending (pending_post_id) is the first.
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

// Server is the fake; its methods are safe for concurrent use. Posts
// holds the bot's new posts under the key "" (a post abandoned while
// held is never created); its Signal is notified at every change.
type Server struct {
	URL      string // the server's base: the channel's url
	Posts    bridgetest.Gate
	srv      *httptest.Server
	mu       sync.Mutex
	next     int
	last     int64
	channels map[string]string // id → type (D, O)
	posts    []*Post
	byID     map[string]*Post
	files    map[string]File
	lastAt   map[string]int64 // channel → its last post's time
	conns    map[*websocket.Conn]bool
	auths    int
}

// New starts a fake, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{channels: map[string]string{}, files: map[string]File{},
		conns: map[*websocket.Conn]bool{}, byID: map[string]*Post{}, lastAt: map[string]int64{}}
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
	t.Cleanup(func() { s.Drop(); s.Posts.Release(""); s.srv.CloseClientConnections(); s.srv.Close() })
	return s
}

// WaitFor waits until cond holds, checked at every change of the fake.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	bridgetest.WaitFor(t, "mattermosttest: "+what, &s.Posts.Signal, cond)
}

func (s *Server) changed() { s.Posts.Notify() }

func (s *Server) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v4/websocket" && r.Header.Get("Authorization") != "Bearer "+Token {
			reply(w, http.StatusUnauthorized, map[string]string{"id": "api.context.session_expired.app_error"})
			return
		}
		h(w, r)
	})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// id is a new id, now a time in ms after any before; s.mu is held.
func (s *Server) id(kind string) string { s.next++; return ID(kind + strconv.Itoa(s.next) + "x") }
func (s *Server) now() int64            { s.last = max(s.last+1, time.Now().UnixMilli()); return s.last }

// DM is the direct message channel between the bot and user.
func (s *Server) DM(user string) string {
	id := ID("dm" + nameOf(user))
	s.Channel(id, "D")
	return id
}

// Channel adds a channel of type kind (D, G, O or P) with the bot in it.
func (s *Server) Channel(id, kind string) { s.mu.Lock(); s.channels[id] = kind; s.mu.Unlock() }

// Send stores a person's post, sends its posted event, returns its id.
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
	s.posts, s.byID[p.ID], s.lastAt[p.Channel] = append(s.posts, p), p, p.CreateAt
	s.broadcast(p)
	return p.ID
}

// Redispatch sends post id's posted event again.
func (s *Server) Redispatch(id string) { s.mu.Lock(); defer s.mu.Unlock(); s.broadcast(s.byID[id]) }

// Sent returns the bot's posts in channel, as they stand now, in order.
func (s *Server) Sent(channel string) (out []Post) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.posts {
		if p.User == Bot.ID && p.Channel == channel {
			out = append(out, *p)
		}
	}
	return out
}

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	id := strings.Replace(r.PathValue("id"), "me", Bot.ID, 1)
	reply(w, http.StatusOK, map[string]any{"id": id, "username": nameOf(id)})
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for id, kind := range s.channels {
		out = append(out, map[string]any{"id": id, "type": kind, "last_post_at": s.lastAt[id]})
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) createPost(w http.ResponseWriter, r *http.Request) {
	var p Post
	if json.NewDecoder(r.Body).Decode(&p) != nil || p.Channel == "" {
		reply(w, http.StatusBadRequest, map[string]string{"id": "api.context.invalid_body_param.app_error"})
		return
	}
	if !s.Posts.Pass(r.Context(), "") || r.Context().Err() != nil {
		return // abandoned by the bot while held: never created
	}
	defer s.changed()
	s.mu.Lock()
	defer s.mu.Unlock()
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
		reply(w, http.StatusNotFound, map[string]string{"id": "app.post.get.app_error"})
		return
	}
	q := Post{Message: p.Message} // what the patch names replaces the post's
	json.NewDecoder(r.Body).Decode(&q)
	if p.Message = q.Message; q.Props != nil {
		p.Props = q.Props
	}
	reply(w, http.StatusOK, p)
}

// channelPosts lists a channel's first per_page posts after a post
// (after), or its latest.
func (s *Server) channelPosts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := slices.DeleteFunc(slices.Clone(s.posts), func(p *Post) bool { return p.Channel != r.PathValue("id") })
	per, _ := strconv.Atoi(q.Get("per_page"))
	per = cmp.Or(per, 60)
	if a := s.byID[q.Get("after")]; a != nil {
		in = slices.DeleteFunc(in, func(p *Post) bool { return p.CreateAt <= a.CreateAt })
		in = in[:min(per, len(in))]
	} else {
		in = in[max(0, len(in)-per):]
	}
	posts := map[string]any{}
	for _, p := range in {
		posts[p.ID] = p
	}
	reply(w, http.StatusOK, map[string]any{"posts": posts}) // and "order", which the bot does not read
}
