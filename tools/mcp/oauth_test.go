package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/tools"
	"loadout/tools/mcp/mcptest"
)

// tokens is an in-memory TokenStore that counts its saves.
type tokens struct {
	mu      sync.Mutex
	m       map[string][]byte
	saves   int
	signIns map[string][]byte
}

func (s *tokens) SaveMCPSignIn(ctx context.Context, id string, sealed []byte, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signIns == nil {
		s.signIns = map[string][]byte{}
	}
	s.signIns[id] = sealed
	return nil
}

func (s *tokens) TakeMCPSignIn(ctx context.Context, id string) ([]byte, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sealed := s.signIns[id]
	delete(s.signIns, id)
	return sealed, time.Time{}, nil
}

func (s *tokens) MCPToken(ctx context.Context, server, user string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[server+"|"+user], nil
}

func (s *tokens) SaveMCPToken(ctx context.Context, server, user string, sealed []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[server+"|"+user] = sealed
	s.saves++
	return nil
}

func (s *tokens) DeleteMCPToken(ctx context.Context, server, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, server+"|"+user)
	return nil
}

// notices records what was sent to chats outside their turns.
type notices struct {
	mu   sync.Mutex
	sent []string // "chat: text"
}

func (n *notices) notify(ctx context.Context, chatKey, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, chatKey+": "+text)
	return nil
}

func (n *notices) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.sent...)
}

var linkRE = regexp.MustCompile(`https?://\S+/authorize\?\S+`)

// link waits for a sign-in link sent to chatKey.
func (n *notices) link(t *testing.T, chatKey string) string {
	t.Helper()
	var link string
	waitFor(t, "a sign-in link in "+chatKey, func() bool {
		for _, s := range n.all() {
			if strings.HasPrefix(s, chatKey+": ") && linkRE.MatchString(s) {
				link = linkRE.FindString(s)
			}
		}
		return link != ""
	})
	return link
}

// callAs calls a tool as userKey in chatKey, as a turn would.
func callAs(t *testing.T, reg *tools.Registry, chatKey, userKey, name string) tools.Result {
	t.Helper()
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: chatKey, UserKey: userKey})
	return tools.NewExecutor(reg, quiet).Run(ctx, reg.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: name, Arguments: `{}`}})[0]
}

const (
	groupChat = "telegram:-100"
	ana, bea  = "telegram:42", "telegram:43"
)

// A remote server behind an OAuth fake (protected resource metadata,
// authorization server metadata, dynamic registration, PKCE and the
// resource checked at the token endpoint, refresh): each person signs in
// with a private link and then uses it with their own token; in a group,
// another person is asked to sign in too, never served with the first
// one's token; tokens are stored sealed, refreshed, and forgotten on
// /disconnect.
func TestEachPersonSignsInToARemoteServer(t *testing.T) {
	o := mcptest.NewOAuth(t)
	o.TokenTTL = 5 * time.Second // under oauth2's 10s margin: every call refreshes
	store := &tokens{m: map[string][]byte{}}
	note := &notices{}
	var signIns *SignIns
	cb := httptest.NewServer(callbackMux(func() *SignIns { return signIns }))
	defer cb.Close()
	var err error
	signIns, err = NewSignIns(SignInConfig{Key: make([]byte, 32), Store: store, RedirectURL: cb.URL + CallbackPath,
		Private: func(chatKey string) bool { return chatKey == ana || chatKey == bea }, Notify: note.notify})
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t)
	c := New(Server{Name: "notes", URL: o.MCPURL(), Auth: AuthPerson}, Deps{SignIns: signIns}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if g, _ := reg.Group("mcp_notes"); !strings.Contains(g.Description, "each person signs in") {
		t.Fatalf("group = %+v", g)
	}

	// In the group: no link there, and none sent anywhere.
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: groupChat, UserKey: ana})
	load := tools.NewExecutor(reg, quiet).Run(ctx, reg.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: "load_tool_group", Arguments: `{"group_name":"mcp_notes"}`}})[0]
	if load.Code != CodeNotConnected || !strings.Contains(load.Content, "/connect notes") || linkRE.MatchString(load.Content) {
		t.Fatalf("load in the group = %+v", load)
	}
	if len(note.all()) != 0 {
		t.Fatalf("something was sent: %q", note.all())
	}
	// In her private chat: the link goes there.
	ctx = tools.WithCaller(context.Background(), tools.Caller{ChatKey: ana, UserKey: ana})
	load = tools.NewExecutor(reg, quiet).Run(ctx, reg.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: "load_tool_group", Arguments: `{"group_name":"mcp_notes"}`}})[0]
	if load.Code != CodeNotConnected || linkRE.MatchString(load.Content) {
		t.Fatalf("load in private = %+v", load)
	}
	link := note.link(t, ana)
	if !strings.Contains(link, "code_challenge_method=S256") || !strings.Contains(link, "resource=") {
		t.Fatalf("link = %s", link)
	}
	if page, err := mcptest.SignIn(link, "ana"); err != nil || !strings.Contains(page, "Signed in to notes") {
		t.Fatalf("sign-in = %v: %s", err, page)
	}
	if page, err := mcptest.SignIn(link, "eve"); err == nil {
		t.Fatalf("a link used twice signed in again: %s", page)
	}
	load = tools.NewExecutor(reg, quiet).Run(ctx, reg.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: "load_tool_group", Arguments: `{"group_name":"mcp_notes"}`}})[0]
	if load.Status != tools.StatusSuccess || !strings.Contains(load.Content, "notes_whoami") {
		t.Fatalf("load after signing in = %+v", load)
	}

	// In the group, Ana's call is hers; Bea's asks her to sign in.
	if r := callAs(t, reg, groupChat, ana, "notes_whoami"); r.Content != "you are ana" {
		t.Fatalf("Ana = %+v", r)
	}
	if r := callAs(t, reg, groupChat, bea, "notes_whoami"); r.Code != CodeNotConnected || strings.Contains(r.Content, "ana") {
		t.Fatalf("Bea before signing in = %+v", r)
	}
	if r := callAs(t, reg, bea, bea, "notes_whoami"); r.Code != CodeNotConnected {
		t.Fatalf("Bea in private = %+v", r)
	}
	if _, err := mcptest.SignIn(note.link(t, bea), "bea"); err != nil {
		t.Fatal(err)
	}
	if r := callAs(t, reg, groupChat, bea, "notes_whoami"); r.Content != "you are bea" {
		t.Fatalf("Bea = %+v", r)
	}
	if r := callAs(t, reg, groupChat, ana, "notes_whoami"); r.Content != "you are ana" {
		t.Fatalf("Ana again = %+v", r)
	}
	// Stored sealed, refreshed and stored again.
	for k, v := range store.m {
		if strings.Contains(string(v), "at-") || strings.Contains(string(v), "rt-") {
			t.Fatalf("%s is stored in clear", k)
		}
	}
	if o.Refreshs == 0 || store.saves <= 2 {
		t.Fatalf("refreshes %d, saves %d", o.Refreshs, store.saves)
	}
	// After a restart (a new client over the same store), Ana's token
	// still serves her.
	c2 := New(Server{Name: "notes", URL: o.MCPURL(), Auth: AuthPerson}, Deps{SignIns: signIns}, quiet)
	reg2 := newRegistry(t)
	if err := Register(context.Background(), reg2, c2); err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx = tools.WithCaller(context.Background(), tools.Caller{ChatKey: groupChat, UserKey: ana})
	tools.NewExecutor(reg2, quiet).Run(ctx, reg2.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: "load_tool_group", Arguments: `{"group_name":"mcp_notes"}`}})
	if r := callAs(t, reg2, groupChat, ana, "notes_whoami"); r.Content != "you are ana" {
		t.Fatalf("Ana after a restart = %+v", r)
	}
	// /disconnect forgets her sign-in.
	if text, err := c.Disconnect(context.Background(), ana); err != nil || !strings.Contains(text, "signed out") {
		t.Fatalf("disconnect = %q, %v", text, err)
	}
	if r := callAs(t, reg, groupChat, ana, "notes_whoami"); r.Code != CodeNotConnected {
		t.Fatalf("Ana after disconnecting = %+v", r)
	}
}

// An authorization server's endpoint that is not https (and not on this
// machine) is refused.
func TestSignInRefusesPlainHTTPEndpoints(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://auth.example/authorize": true,
		"http://127.0.0.1:9/token":       true,
		"http://localhost/token":         true,
		"http://auth.example/authorize":  false,
		"http://10.0.0.1/token":          false,
		"javascript:alert(1)":            false,
	} {
		if err := secureURL(raw); (err == nil) != ok {
			t.Errorf("secureURL(%q) = %v", raw, err)
		}
	}
}

// callbackMux serves CallbackPath with the sign-ins get returns.
func callbackMux(get func() *SignIns) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CallbackPath, func(w http.ResponseWriter, r *http.Request) { get().ServeHTTP(w, r) })
	return mux
}
