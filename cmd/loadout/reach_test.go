package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/google/googletest"
	"loadout/tools"
)

// The fake Google API's people, whom a change to what it answers reaches
// (see fakeGoogleAnswer): a draft's recipient, a folder's grantee, an
// event's attendee.
const (
	fakeDraftTo   = "draft@example.com"
	fakeGrantee   = "shared@example.com"
	fakeAttendees = "attendee@example.com"
)

// TEST (finding: a rule's scope was read from argument text, not from
// whom a call reaches): for every Workspace tool that can need approval,
// generated calls go through the executor as the engine runs them; the
// reach the gate reads (tools.ReachOf: reach tags and what the tool
// resolves at run time) is compared with the requests the call then
// sends to a fake Google API that records them. Everyone a request mails,
// invites or shares with must be among the reach's recipients or its
// domains, unless the reach says it cannot tell (which no scoped rule
// covers). A tool that reaches someone it does not declare fails here.
func TestEveryReachNamesWhomACallReaches(t *testing.T) {
	api, reg, ctx, cat := workspaceOnFake(t)
	rng := rand.New(rand.NewPCG(47, 1))
	reaching := map[string]bool{}
	for _, d := range reg.All(nil) {
		if !confirmable(d) {
			continue
		}
		for i := range 40 {
			args, _ := generateArgs(rng, d.Name, d.Parameters)
			var reach tools.Reach
			ex := tools.NewExecutor(reg, quietLog())
			ex.SetGate(func(ctx context.Context, d tools.Definition, _ tools.Call, in tools.Input) (tools.Result, bool, func(tools.Result)) {
				reach = tools.ReachOf(ctx, d, in)
				return tools.Result{}, false, nil
			})
			before := len(api.Requests())
			ex.Run(ctx, cat, []tools.Call{{ID: "c1", Name: d.Name, Arguments: args}})
			for _, r := range api.Requests()[before:] {
				for _, who := range reachedBy(r) {
					reaching[d.Name] = true
					if !reach.Known() {
						continue
					}
					domain := who[strings.LastIndex(who, "@")+1:]
					if !slices.Contains(reach.Recipients, who) && !slices.Contains(reach.Domains, domain) {
						t.Errorf("%s case %d: %s %s reaches %s, which its reach does not declare (%s)\narguments: %s", d.Name, i, r.Method, r.Path, who, reach, args)
					}
				}
			}
		}
	}
	// The tools that reach people were tried.
	for _, name := range []string{"gmail_send", "gmail_reply", "gmail_send_draft", "gmail_create_filter", "drive_share", "drive_move",
		"calendar_create_event", "calendar_update_event", "calendar_delete_event"} {
		if !reaching[name] {
			t.Errorf("%s: no generated call reached anyone", name)
		}
	}
}

// reachedBy is everyone a request to Google mails, invites or shares
// with: a sent mail's To, Cc and Bcc; a sent draft's recipients; a
// permission's grantee; a folder's grantees for what moves into it; an
// event's attendees when the change is mailed; a filter's forward.
func reachedBy(r googletest.Request) []string {
	var out []string
	var body map[string]any
	_ = json.Unmarshal([]byte(r.Body), &body)
	add := func(list ...string) {
		for _, a := range list {
			if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
				out = append(out, a)
			}
		}
	}
	switch {
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/messages/send"):
		raw, _ := body["raw"].(string)
		b, err := base64.URLEncoding.DecodeString(raw)
		if err != nil {
			b, _ = base64.RawURLEncoding.DecodeString(raw)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(b))
		if err != nil {
			return []string{"a mail that does not parse"}
		}
		for _, h := range []string{"To", "Cc", "Bcc"} {
			list, _ := msg.Header.AddressList(h)
			for _, a := range list {
				add(a.Address)
			}
		}
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/drafts/send"):
		add(fakeDraftTo)
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/permissions"):
		if e, _ := body["emailAddress"].(string); e != "" {
			add(e)
		}
		if d, _ := body["domain"].(string); d != "" {
			add("anyone@" + d)
		}
	case r.Method == "PATCH" && strings.Contains(r.Path, "/files/") && r.Query.Get("addParents") != "" && r.Query.Get("addParents") != "root":
		add(fakeGrantee)
	case strings.Contains(r.Path, "/events") && r.Method != "GET" && r.Query.Get("sendUpdates") != "none":
		for _, a := range asList(body["attendees"]) {
			if m, ok := a.(map[string]any); ok {
				e, _ := m["email"].(string)
				add(e)
			}
		}
		if r.Method != "POST" {
			add(fakeAttendees)
		}
	case strings.HasSuffix(r.Path, "/settings/filters") && r.Method == "POST":
		if act, ok := body["action"].(map[string]any); ok {
			f, _ := act["forward"].(string)
			add(f)
		}
	}
	return out
}

// TEST (the finding, through loadout serve on Telegram): a "notify"
// manifest tool whose call to ana@example.com is always allowed asks
// again, and sends nothing, for a call that also reaches another domain
// in any of the forms net/mail reads; one to example.com alone runs
// unasked.
func TestAlwaysAllowedManifestToolAsksForEveryOtherDomain(t *testing.T) {
	var posts atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	dir := t.TempDir()
	manifest := fmt.Sprintf(`[{"_meta":true,"display_name":"Notify","description":"Notifications"},
	  {"name":"notify_send","description":"Send a notification to addresses","effect":"destructive",
	   "parameters":{"type":"object","properties":{"to":{"type":"string"},"message":{"type":"string"}},"required":["to","message"]},
	   "http":{"method":"POST","url":%q}}]`, site.URL+"/send")
	if err := os.WriteFile(filepath.Join(dir, "notify.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	_, stop := serveTelegram(t, tg, model, "web:\n  allow_hosts: [\"127.0.0.1\"]\ntools:\n  manifests_dir: "+dir+"\n")
	defer stop()
	ana := telegramtest.User{ID: 42}
	notify := func(to string) string {
		b, _ := json.Marshal(map[string]string{"to": to, "message": "the build is green"})
		return string(b)
	}

	model.Call("load_tool_group", `{"group_name":"notify"}`)
	model.Call("notify_send", notify("ana@example.com"))
	model.Text("Told Ana.")
	tg.Push(telegramtest.Message{From: ana, Text: "tell Ana"})
	q, b := buttonsOf(t, tg, "without asking from now on: notify_send to addresses at example.com reaching 127.0.0.1")
	if b["Always allow"] == "" {
		t.Fatalf("no Always allow button: %+v", q.Buttons)
	}
	tg.Click(ana, 42, 0, q.MessageID, b["Always allow"])
	waitText(t, tg, "Told Ana.")
	if posts.Load() != 1 {
		t.Fatalf("%d posts after Always allow", posts.Load())
	}
	for i, to := range []string{`bob@example.com, "eve"@evil.example`, `bob@example.com, eve=@evil.example`,
		`bob@example.com, eve@[192.0.2.7]`, `bob@example.com, eve@localhost`} {
		// Each turn after /clear loads the group again.
		model.Call("load_tool_group", `{"group_name":"notify"}`)
		model.Call("notify_send", notify(to))
		tg.Push(telegramtest.Message{From: ana, Text: fmt.Sprintf("tell them %d", i)})
		waitCount(t, tg, "a question about "+to, i+2, func(s telegramtest.Sent) bool {
			return strings.Contains(s.Text, "I need your approval first")
		})
		if posts.Load() != 1 {
			t.Fatalf("%s: sent under the rule for example.com", to)
		}
		tg.Push(telegramtest.Message{From: ana, Text: "/clear"})
		waitCount(t, tg, "the conversation cleared", i+1, func(s telegramtest.Sent) bool { return strings.Contains(s.Text, "new conversation") })
	}
	model.Call("load_tool_group", `{"group_name":"notify"}`)
	model.Call("notify_send", notify("Bob <bob@example.com>"))
	model.Text("Told Bob.")
	tg.Push(telegramtest.Message{From: ana, Text: "tell Bob"})
	waitText(t, tg, "Told Bob.")
	if posts.Load() != 2 {
		t.Fatalf("%d posts, want 2", posts.Load())
	}
}

// waitCount waits until n messages sent match.
func waitCount(t *testing.T, tg *telegramtest.Server, what string, n int, match func(telegramtest.Sent) bool) {
	t.Helper()
	tg.WaitFor(t, what, func() bool {
		c := 0
		for _, s := range tg.Sent() {
			if match(s) {
				c++
			}
		}
		return c >= n
	})
}
