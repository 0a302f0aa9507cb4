package slack

import (
	"context"
	"errors"
	"testing"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"

	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// An allowlist entry "TEAM:USER" lets in that workspace's user; a bare
// user id only the user of the app's own workspace (auth.test's team).
// A person's workspace is the event's user_team in a channel shared
// between workspaces, else the event's team.
func TestAllowlistEntriesAreScopedToWorkspaces(t *testing.T) {
	const other = "T0002"
	own := slacktest.TeamID
	allowed := []string{owner, other + ":UGUEST", own + ":UMEMBER"}
	shared := func(e slacktest.Event) slacktest.Event {
		e["user_team"], e["source_team"] = other, other
		return e
	}
	for _, c := range []struct {
		name  string
		team  string // the callback's team_id
		event slacktest.Event
		text  string // what the model gets; "" when refused
		user  string // the message's user key when let in
	}{
		{"bare id in the own workspace", own, slacktest.DM("D1", owner, "hello from home", "1.1"), "hello from home", "slack:T0001:UOWNER"},
		{"bare id from another workspace", other, slacktest.DM("D1", owner, "hello from away", "1.1"), "", ""},
		{"bare id of a shared channel's guest", own,
			shared(slacktest.Mention("C1", owner, "<@UBOT> a guest with the owner's id", "1.1", "")), "", ""},
		{"team entry from its workspace", other, slacktest.DM("D1", "UGUEST", "guest here", "1.1"), "guest here", "slack:T0002:UGUEST"},
		{"team entry as a shared channel's guest", own,
			shared(slacktest.Mention("C1", "UGUEST", "<@UBOT> guest in a shared channel", "1.1", "")), "guest in a shared channel", "slack:T0002:UGUEST"},
		{"team entry in another workspace", own, slacktest.DM("D1", "UGUEST", "not that guest", "1.1"), "", ""},
		{"own team entry", own, slacktest.DM("D1", "UMEMBER", "member here", "1.1"), "member here", "slack:T0001:UMEMBER"},
		{"own team entry from another workspace", other, slacktest.DM("D1", "UMEMBER", "not that member", "1.1"), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, options{allowed: allowed})
			h.env.Model.Text("welcome")
			payload := slacktest.Callback("Ev1", c.event)
			payload["team_id"] = c.team
			h.fake.Send(t, "env-1", "events_api", payload, 0)
			h.fake.WaitAck(t, "env-1")
			post := h.fake.WaitCalls(t, "chat.postMessage", 1)[0].Params["text"]
			chattest.Eventually(t, "the event done", func() bool { return unfinished(h.env) == 0 })
			var user, stored string
			h.env.Store.Gorm().Raw("SELECT user_key, text FROM inbox_items WHERE event_id = 'event:Ev1'").Row().Scan(&user, &stored)
			if c.text == "" {
				if post != Mrkdwn(bridge.TextRefused) {
					t.Errorf("answered %q, want the refusal", post)
				}
				if n := len(h.env.Model.Requests()); n != 0 {
					t.Errorf("a refused message reached the model (%d requests)", n)
				}
				if stored != "" || user != "" {
					t.Errorf("a refused message was stored: user %q, text %q", user, stored)
				}
				return
			}
			if post != "welcome" {
				t.Errorf("answered %q, want the model's answer", post)
			}
			if got := h.env.Model.Last(t).Messages; got[len(got)-1].Content != c.text {
				t.Errorf("model got %q, want %q", got[len(got)-1].Content, c.text)
			}
			if user != c.user {
				t.Errorf("user key %q, want %q", user, c.user)
			}
		})
	}
}

// A slash command is judged by the same rule.
func TestAllowlistScopesSlashCommands(t *testing.T) {
	h := start(t, options{})
	away := slacktest.SlashCommand("D1", owner, "help", h.fake.ResponseURL("away"))
	away["team_id"] = "T0002"
	h.fake.Send(t, "env-1", "slash_commands", away, 0)
	h.fake.WaitAck(t, "env-1")
	h.fake.Send(t, "env-2", "slash_commands", slacktest.SlashCommand("D1", owner, "help", h.fake.ResponseURL("home")), 0)
	h.fake.WaitAck(t, "env-2")
	calls := h.fake.WaitCalls(t, "response_url", 2)
	byID := map[string]string{}
	for _, c := range calls {
		byID[c.Params["id"]] = c.Params["text"]
	}
	if byID["away"] != Mrkdwn(bridge.TextRefused) {
		t.Errorf("the owner's id from another workspace got %q, want the refusal", byID["away"])
	}
	if byID["home"] == "" || byID["home"] == Mrkdwn(bridge.TextRefused) {
		t.Errorf("the owner got %q, want the help", byID["home"])
	}
}

// The web side asks whether a person is let in by their key alone: the
// same scoping as a message's. A bare id needs the app's own workspace,
// which is not known before auth.test: then it cannot tell, and says so
// rather than refusing.
func TestAdmitsScopesAKeyAsAMessage(t *testing.T) {
	const other = "T0002"
	own := slacktest.TeamID
	a := New(Config{AllowedUsers: []string{owner, other + ":UGUEST"}}, nil, storetest.NewEnv(t, storetest.Options{}).Store)
	if _, err := a.Admits(context.Background(), "slack:"+own+":"+owner); !errors.Is(err, errNotReady) {
		t.Fatalf("before auth.test: %v", err)
	}
	a.mu.Lock()
	a.teamID = own
	a.mu.Unlock()
	for key, want := range map[string]bool{
		"slack:" + own + ":" + owner:    true,
		"slack:" + other + ":" + owner:  false,
		"slack:" + other + ":UGUEST":    true,
		"slack:" + own + ":UGUEST":      false,
		"slack:" + own + ":USTRANGER":   false,
		"telegram:" + own + ":" + owner: false,
		"slack:" + owner:                false,
	} {
		if got, err := a.Admits(context.Background(), key); got != want || err != nil {
			t.Errorf("%s: %v %v, want %v", key, got, err, want)
		}
	}
}
