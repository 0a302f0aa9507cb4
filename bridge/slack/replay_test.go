package slack

import (
	"net/http"
	"testing"
	"time"

	"loadout/bridge/slack/slacktest"
)

// responseIDs returns the response URL ids answered, in order.
func responseIDs(calls []slacktest.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Params["id"]
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A slash command request replayed with its signature inside the
// five-minute window passes the signature check; it is answered once,
// whether it carries a trigger id or only its body names it. Older
// replays fail the signature check.
func TestSlashCommandReplayOverHTTPAnsweredOnce(t *testing.T) {
	e := startEvents(t)
	now := time.Now()
	post := func(form []byte, at time.Time) int {
		t.Helper()
		resp, _ := e.post(t, "/slack/commands", form, slacktest.Sign(secret, at, form))
		return resp.StatusCode
	}

	cmd := slacktest.SlashCommand("D1", owner, "help", e.fake.ResponseURL("r1"))
	form := slacktest.Form(cmd)
	for i := 0; i < 2; i++ {
		if code := post(form, now); code != http.StatusOK {
			t.Fatalf("delivery %d: status %d", i, code)
		}
	}
	if code := post(form, now.Add(-6*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("replay signed six minutes ago: status %d, want 401", code)
	}

	delete(cmd, "trigger_id")
	cmd["response_url"] = e.fake.ResponseURL("r2")
	bare := slacktest.Form(cmd)
	for i := 0; i < 2; i++ {
		if code := post(bare, now.Add(time.Duration(i)*time.Second)); code != http.StatusOK {
			t.Fatalf("command without a trigger, delivery %d: status %d", i, code)
		}
	}

	// The same words typed again are a new command.
	if code := post(slacktest.Form(slacktest.SlashCommand("D1", owner, "help", e.fake.ResponseURL("r3"))), now); code != http.StatusOK {
		t.Fatalf("next command: status %d", code)
	}
	calls := e.fake.WaitCalls(t, "response_url", 3)
	if got := responseIDs(calls); !equal(got, []string{"r1", "r2", "r3"}) {
		t.Fatalf("answered %v, want r1, r2 and r3 once each", got)
	}
}

// Over Socket Mode a slash command delivered again, in another envelope
// or the same one, is answered once: its trigger id names it.
func TestSlashCommandReplayOverSocketAnsweredOnce(t *testing.T) {
	h := start(t, options{})
	cmd := slacktest.SlashCommand("D1", owner, "help", h.fake.ResponseURL("s1"))
	h.fake.Send(t, "env-1", "slash_commands", cmd, 0)
	h.fake.WaitAck(t, "env-1")
	h.fake.Send(t, "env-2", "slash_commands", cmd, 0)
	h.fake.WaitAck(t, "env-2")
	h.fake.Send(t, "env-1", "slash_commands", cmd, 1)
	h.fake.WaitFor(t, "env-1 acknowledged again", func() bool { return h.fake.Acks("env-1") == 2 })

	h.fake.Send(t, "env-3", "slash_commands", slacktest.SlashCommand("D1", owner, "help", h.fake.ResponseURL("s2")), 0)
	h.fake.WaitAck(t, "env-3")
	calls := h.fake.WaitCalls(t, "response_url", 2)
	if got := responseIDs(calls); !equal(got, []string{"s1", "s2"}) {
		t.Fatalf("answered %v, want s1 and s2 once each", got)
	}
}
