package mcp

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"loadout/store"
	"loadout/tools"
	"loadout/tools/mcp/mcptest"
)

// The authorization server may send a person back to any process
// sharing the store (a file, or PostgreSQL with LOADOUT_TEST_DSN): a
// sign-in link one process made is finished by the other, once, and the
// first then serves the person with the token the other stored, until
// they sign out on either.
func TestSignInFinishedByAnotherProcess(t *testing.T) {
	o := mcptest.NewOAuth(t)
	path := filepath.Join(t.TempDir(), "loadout.db")
	var one, two *SignIns
	cbOne := httptest.NewServer(callbackMux(func() *SignIns { return one }))
	defer cbOne.Close()
	cbTwo := httptest.NewServer(callbackMux(func() *SignIns { return two }))
	defer cbTwo.Close()
	process := func() (*SignIns, *tools.Registry, *Client) {
		db, err := store.OpenTest(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		// Both have the deployment's one public callback URL.
		s, err := NewSignIns(SignInConfig{Key: make([]byte, 32), Store: db, RedirectURL: cbOne.URL + CallbackPath,
			Private: func(chatKey string) bool { return chatKey == ana }})
		if err != nil {
			t.Fatal(err)
		}
		reg := newRegistry(t)
		c := New(Server{Name: "notes", URL: o.MCPURL(), Auth: AuthPerson}, Deps{SignIns: s}, quiet)
		if err := Register(context.Background(), reg, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return s, reg, c
	}
	one, regOne, cOne := process()
	two, _, cTwo := process()

	text, err := cOne.Connect(context.Background(), ana, ana)
	link := linkRE.FindString(text)
	if err != nil || link == "" {
		t.Fatalf("/connect notes = %q, %v", text, err)
	}
	if page, err := mcptest.SignInAt(link, "ana", cbTwo.URL); err != nil || !strings.Contains(page, "Signed in to notes") {
		t.Fatalf("finished by the other process: %v: %s", err, page)
	}
	for _, base := range []string{cbOne.URL, cbTwo.URL} {
		if page, err := mcptest.SignInAt(link, "eve", base); err == nil {
			t.Fatalf("a link used twice signed in again: %s", page)
		}
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: ana, UserKey: ana})
	tools.NewExecutor(regOne, quiet).Run(ctx, regOne.Catalog(true, nil, nil), []tools.Call{{ID: "c1", Name: "load_tool_group", Arguments: `{"group_name":"mcp_notes"}`}})
	if r := callAs(t, regOne, ana, ana, "notes_whoami"); r.Content != "you are ana" {
		t.Fatalf("the first process serves Ana with %+v", r)
	}
	// Signed out through the other process: the first's session ends.
	if text, err := cTwo.Disconnect(context.Background(), ana); err != nil || !strings.Contains(text, "signed out") {
		t.Fatalf("/disconnect notes on the other process = %q, %v", text, err)
	}
	if r := callAs(t, regOne, ana, ana, "notes_whoami"); r.Code != CodeNotConnected {
		t.Fatalf("after signing out on the other process, the first serves Ana with %+v", r)
	}
}
