package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"
)

// fuzzAllowed is the allowlist of the fuzz targets; allowedPerson is the
// same rule written out, to judge what the adapter let in.
var fuzzAllowed = []string{owner, "T0002:UGUEST"}

func allowedPerson(team, user string) bool {
	return (team == slacktest.TeamID && user == owner) || (team == "T0002" && user == "UGUEST")
}

// fuzzAdapter is an adapter that knows its workspace and bot user, as
// after auth.test, and is never run.
func fuzzAdapter() *Adapter {
	a := New(Config{BotToken: "xoxb-test", AllowedUsers: fuzzAllowed, AllowedChannels: []string{"C1", "C2"},
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(nil, "loadout"), nil)
	a.botUserID, a.teamID = slacktest.BotUserID, slacktest.TeamID
	return a
}

// sender is who an event payload says sent it, read independently of
// slackevents: the person's workspace is the inner user_team, else the
// callback's team_id.
func sender(raw []byte) (team, user string) {
	var p struct {
		TeamID string `json:"team_id"`
		Event  struct {
			User     string `json:"user"`
			UserTeam string `json:"user_team"`
		} `json:"event"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "", ""
	}
	team = p.Event.UserTeam
	if team == "" {
		team = p.TeamID
	}
	return team, p.Event.User
}

func checkPending(t *testing.T, pend bridge.Pending, team, user string) {
	t.Helper()
	if pend.Reply != "" && (pend.Inbound.Text != "" || pend.Inbound.UserKey != "") {
		t.Fatalf("a reply without a turn carries the person's message: %+v", pend.Inbound)
	}
	if pend.Inbound.Text == "" {
		return
	}
	if !allowedPerson(team, user) {
		t.Fatalf("%s:%s is not allowed, yet their text %q goes to the handler", team, user, pend.Inbound.Text)
	}
	if want := "slack:" + team + ":" + user; pend.Inbound.UserKey != want {
		t.Fatalf("user key %q, want %q", pend.Inbound.UserKey, want)
	}
	var r route
	if err := json.Unmarshal(pend.Route, &r); err != nil {
		t.Fatalf("route %q: %v", pend.Route, err)
	}
}

// FuzzEventToPending feeds Events API payloads (the same callbacks Socket
// Mode carries in its envelopes) through parsing and the judgement of
// who may talk: nothing panics, and only an allowed person's text ever
// reaches the handler.
func FuzzEventToPending(f *testing.F) {
	seed := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	guest := slacktest.Mention("C1", "UGUEST", "<@UBOT> hi from the guest", "1.2", "")
	guest["user_team"], guest["source_team"] = "T0002", "T0002"
	intruder := slacktest.Mention("C1", owner, "<@UBOT> same id, other workspace", "1.3", "")
	intruder["user_team"] = "T0666"
	away := slacktest.Callback("Ev3", slacktest.DM("D1", owner, "from another workspace", "1.4"))
	away["team_id"] = "T0666"
	botMsg := slacktest.DM("D1", owner, "a bot's words", "1.5")
	botMsg["bot_id"] = "B9"
	edited := slacktest.DM("D1", "USTRANGER", "edited", "1.6")
	edited["subtype"] = "message_changed"
	edited["message"] = map[string]any{"user": owner, "text": "smuggled", "ts": "1.6"}
	for _, v := range []any{
		slacktest.Callback("Ev1", slacktest.DM("D1", owner, "hello &lt;there&gt; <https://x.y|link>", "1.1")),
		slacktest.Callback("Ev2", slacktest.Mention("C1", owner, "<@UBOT> clear", "2.1", "1.0")),
		slacktest.Callback("Ev4", slacktest.DM("D9", "USTRANGER", "let me in", "1.7")),
		slacktest.Callback("Ev5", slacktest.Mention("C2", "USTRANGER", "<@UBOT> let me in", "1.8", "")),
		slacktest.Callback("Ev6", guest),
		slacktest.Callback("Ev7", intruder),
		away,
		slacktest.Callback("Ev8", botMsg),
		slacktest.Callback("Ev9", edited),
		slacktest.Callback("Ev10", slacktest.DM("D1", slacktest.BotUserID, "my own words", "1.9")),
		slacktest.Callback("Ev11", slacktest.Mention("D1", owner, "<@UBOT> mention in a DM", "2.0", "")),
		slacktest.Callback("Ev12", slacktest.Mention("C9", owner, "<@UBOT> elsewhere", "2.2", "")),
		slacktest.Callback("Ev13", slacktest.DM("D1", owner, strings.Repeat("<@UBOT>", 2000), "2.3")),
		slacktest.Callback("Ev14", slacktest.Event{"type": "reaction_added", "user": owner, "reaction": "x"}),
		slacktest.Callback("Ev15", slacktest.Event{"type": "no_such_event", "user": owner, "text": "hi"}),
		map[string]any{"type": "url_verification", "challenge": "abc"},
		map[string]any{"type": "app_rate_limited", "team_id": "T0001", "minute_rate_limited": 1},
	} {
		seed(v)
	}
	for _, raw := range []string{
		``, `null`, `[]`, `"event_callback"`, `{}`,
		`{"type":"event_callback"}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":null}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":"message"}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"D1","user":["UOWNER"],"text":"hi"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"D1","user":"USTRANGER","user":"UOWNER","text":"dup keys"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"D1","User":"UOWNER","USER":"USTRANGER","text":"case"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"app_mention","channel":"C1","user":"UOWNER","user_team":"","text":"<@UBOT> \u0000\ud800 \xff"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"","event":{"type":"message","channel_type":"im","channel":"D1","user":"UOWNER","text":"no team"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"D1","user":"UOWNER","text":"<@","blocks":[{"type":"rich_text","elements":[{}]}],"files":[{}]}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"","user":"UOWNER","text":"clear"}}`,
		`{"type":"event_callback","event_id":"Ev","team_id":"T0001","event":{"type":"message","channel_type":"im","channel":"D1","user":"UOWNER","text":"` + strings.Repeat(`[`, 5000) + `"}}`,
		`{"type":"event_callback","event":{"type":"message","event":{"type":"message"}}}` + strings.Repeat(`}`, 100),
	} {
		f.Add([]byte(raw))
	}
	a := fuzzAdapter()
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := slackevents.ParseEvent(json.RawMessage(raw), slackevents.OptionNoVerifyToken())
		if err != nil || ev.Type != slackevents.CallbackEvent {
			return
		}
		pend, ok := a.toPending(context.Background(), ev.TeamID, ev.InnerEvent.Data)
		if !ok {
			return
		}
		team, user := sender(raw)
		checkPending(t, pend, team, user)
	})
}

// FuzzSlashCommandToPending feeds slash command request bodies through
// parsing and judgement: nothing panics, and only an allowed person's
// command reaches the handler.
func FuzzSlashCommandToPending(f *testing.F) {
	cmd := func(mut func(map[string]string)) []byte {
		c := slacktest.SlashCommand("D1", owner, "status", "https://hooks.slack.test/r/1")
		if mut != nil {
			mut(c)
		}
		return slacktest.Form(c)
	}
	f.Add(cmd(nil))
	f.Add(cmd(func(c map[string]string) { c["text"] = "" }))
	f.Add(cmd(func(c map[string]string) { c["text"] = "/clear now"; c["channel_id"] = "C1" }))
	f.Add(cmd(func(c map[string]string) { c["user_id"] = "USTRANGER"; c["text"] = "let me in" }))
	f.Add(cmd(func(c map[string]string) { c["team_id"] = "T0666" }))
	f.Add(cmd(func(c map[string]string) { c["team_id"] = "T0002"; c["user_id"] = "UGUEST" }))
	f.Add(cmd(func(c map[string]string) { c["text"] = "/" + strings.Repeat("x", 10000) }))
	f.Add([]byte("user_id=UOWNER&user_id=USTRANGER&team_id=T0001&text=help"))
	f.Add([]byte("user_id=USTRANGER&team_id=T0001&text=%ZZ&text=help"))
	f.Add([]byte("team_id=T0001;user_id=UOWNER&text=%00%ff"))
	f.Add([]byte(""))
	a := fuzzAdapter()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/slack/commands", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c, err := slackapi.SlashCommandParse(req)
		if err != nil {
			return
		}
		pend, ok := a.slashPending(c)
		if !ok {
			return
		}
		checkPending(t, pend, c.TeamID, c.UserID)
		if pend.Inbound.Text != "" && !strings.HasPrefix(pend.Inbound.Text, "/") {
			t.Fatalf("a slash command reached the handler as %q, not as a command", pend.Inbound.Text)
		}
	})
}
