package gmail_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"
	"google.golang.org/api/option"

	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/google"
	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/store/storetest"
	"loadout/tools"
)

// toolResults returns the tool messages of a model request.
func toolResults(req goopenai.ChatCompletionRequest) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// TestEngineTurnLoadsGmailAndSearchesAsTheSender runs real turns in a
// group chat: the fake model loads google_gmail and searches. Ana's turn
// reaches Ana's mailbox with Ana's token; Bob, not connected, gets
// not_connected in the same chat.
func TestEngineTurnLoadsGmailAndSearchesAsTheSender(t *testing.T) {
	f := googletest.NewAPI(t)
	bearers := make(chan string, 10)
	f.Handle("GET /gmail/v1/users/me/messages", func(r googletest.Request) (int, string) { return 200, listJSON })
	f.Handle("GET /gmail/v1/users/me/messages/18c2a1f0b2d3e4f5", func(r googletest.Request) (int, string) {
		return 200, metaJSON("18c2a1f0b2d3e4f5", "18c2a1f0b2d3e4f5", "Bob Ng <bob@example.com>", "Invoice 42", "Please pay", "INBOX")
	})
	f.Handle("GET /gmail/v1/users/me/messages/18c29e7d6c5b4a39", func(r googletest.Request) (int, string) {
		return 200, metaJSON("18c29e7d6c5b4a39", "18c29d0000000001", "Carla <carla@example.org>", "Lunch", "Sure", "INBOX")
	})
	// Check every API request's bearer token belongs to Ana.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		bearers <- r.Header.Get("Authorization")
		if r.Header.Get("Authorization") != "Bearer ana-access" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`))
			return
		}
		f.ServeHTTP(w, r)
	})
	api := newServer(t, mux)
	oauth := googletest.NewOAuthServer(t, "cid")

	var acc *google.Accounts
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		mg := gmail.New(lazyClient{&acc}, gmail.Options{})
		g, ts := mg.Group, mg.Tools
		return r.AddGroup(g, ts...)
	}})
	var err error
	acc, err = google.New(google.Config{
		ClientID: "cid", ClientSecret: "s", RedirectURL: "http://127.0.0.1:1/oauth/google/callback",
		Scopes: gmail.Service().Scopes, Key: bytes.Repeat([]byte{1}, 32), Store: env.Store, Endpoint: api,
		AuthURL: oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	link, _ := acc.AuthURL("telegram:1", "telegram:-100")
	back, _ := url.Parse(oauth.Approve(t, link, "ana-access", "ana-refresh", ""))
	if _, err := acc.Finish(context.Background(), back.Query().Get("state"), back.Query().Get("code")); err != nil {
		t.Fatal(err)
	}

	env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	env.Model.Call("gmail_search", `{"query":"is:unread","max_results":2}`)
	env.Model.Text("You have an invoice from Bob.")
	reply, err := env.Engine.Handle(context.Background(), chat.Inbound{ChatKey: "telegram:-100", UserKey: "telegram:1", Text: "any unread mail?"})
	if err != nil || reply.Text != "You have an invoice from Bob." {
		t.Fatalf("reply = %q, %v", reply.Text, err)
	}
	reqs := env.Model.Requests()
	if !slices.Contains(chattest.ToolNames(reqs[1]), "gmail_search") {
		t.Fatalf("gmail_search not offered after loading: %v", chattest.ToolNames(reqs[1]))
	}
	results := toolResults(reqs[2])
	if last := results[len(results)-1]; !strings.Contains(last, "Invoice 42") || !strings.Contains(last, "18c2a1f0b2d3e4f5") {
		t.Fatalf("search result = %s", last)
	}
	if q := f.Last("GET /gmail/v1/users/me/messages").Query.Get("q"); q != "is:unread" {
		t.Fatalf("q = %q", q)
	}
	close(bearers)
	n := 0
	for b := range bearers {
		n++
		if b != "Bearer ana-access" {
			t.Fatalf("a request used %q", b)
		}
	}
	if n != 3 {
		t.Fatalf("%d API requests, want 3", n)
	}

	// Bob speaks in the same group chat; the group is still loaded, but
	// his turn cannot use Ana's account.
	env.Model.Call("gmail_search", `{"query":"is:unread"}`)
	env.Model.Text("Please connect first.")
	if _, err := env.Engine.Handle(context.Background(), chat.Inbound{ChatKey: "telegram:-100", UserKey: "telegram:2", Text: "and mine?"}); err != nil {
		t.Fatal(err)
	}
	reqs = env.Model.Requests()
	results = toolResults(reqs[len(reqs)-1])
	if last := results[len(results)-1]; !strings.Contains(last, `"code":"not_connected"`) || !strings.Contains(last, "/connect google") {
		t.Fatalf("Bob's result = %s", last)
	}
}

// lazyClient lets the registry be built before Accounts, which needs the
// env's store.
type lazyClient struct{ acc **google.Accounts }

func (l lazyClient) Options(ctx context.Context, svc google.Service) ([]option.ClientOption, error) {
	return (*l.acc).Options(ctx, svc)
}

// countingStore counts the reads of sealed Google accounts.
type countingStore struct {
	google.TokenStore
	mu    sync.Mutex
	reads int
}

func (s *countingStore) GoogleToken(ctx context.Context, userKey string) ([]byte, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.TokenStore.GoogleToken(ctx, userKey)
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// A turn reads and decrypts the person's account once, however many of
// its calls reach Google (here four, in two rounds, two at once); the
// next turn reads it again, so a disconnect between turns is seen.
func TestATurnReadsThePersonsAccountOnce(t *testing.T) {
	f := googletest.NewAPI(t)
	f.Handle("GET /gmail/v1/users/me/messages", func(r googletest.Request) (int, string) { return 200, `{"messages":[],"resultSizeEstimate":0}` })
	f.Handle("GET /gmail/v1/users/me/labels", func(r googletest.Request) (int, string) {
		return 200, `{"labels":[{"id":"INBOX","name":"INBOX","type":"system"}]}`
	})
	api := newServer(t, f)
	oauth := googletest.NewOAuthServer(t, "cid")
	var acc *google.Accounts
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		mg := gmail.New(lazyClient{&acc}, gmail.Options{})
		return r.AddGroup(mg.Group, mg.Tools...)
	}})
	store := &countingStore{TokenStore: env.Store}
	var err error
	acc, err = google.New(google.Config{
		ClientID: "cid", ClientSecret: "s", RedirectURL: "http://127.0.0.1:1/oauth/google/callback",
		Scopes: gmail.Service().Scopes, Key: bytes.Repeat([]byte{1}, 32), Store: store, Endpoint: api,
		AuthURL: oauth.AuthURL(), TokenURL: oauth.TokenURL(), RevokeURL: oauth.RevokeURL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	link, _ := acc.AuthURL("telegram:1", "telegram:1")
	back, _ := url.Parse(oauth.Approve(t, link, "ana-access", "ana-refresh", ""))
	if _, err := acc.Finish(context.Background(), back.Query().Get("state"), back.Query().Get("code")); err != nil {
		t.Fatal(err)
	}
	before := store.count()
	env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	env.Model.Call("gmail_search", `{"query":"is:unread"}`, "gmail_list_labels", `{}`)
	env.Model.Call("gmail_search", `{"query":"from:bob"}`, "gmail_list_labels", `{}`)
	env.Model.Text("Nothing new.")
	in := chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:1", Text: "anything new?"}
	if _, err := env.Engine.Handle(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Requests()); n != 4 {
		t.Fatalf("%d API requests, want 4", n)
	}
	if n := store.count() - before; n != 1 {
		t.Fatalf("the account was read %d times in one turn, want 1", n)
	}
	env.Model.Call("gmail_list_labels", `{}`)
	env.Model.Text("INBOX.")
	in.Text = "labels?"
	if _, err := env.Engine.Handle(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if n := store.count() - before; n != 2 {
		t.Fatalf("the account was read %d times in two turns, want 2", n)
	}
}
