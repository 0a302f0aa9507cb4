package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/chat"
	"loadout/chat/chattest"
)

// Every operator page renders the store's real data.
func TestOperatorPages(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.operator(t, c)
	want := map[string][]string{
		"/":                               {"test-model", "console", s.Event.Ref(), "Messages per hour", "<polyline", "approvals pending: 1", "2 tool calls failed"},
		"/chats":                          {"console:local", "purge_archive"[:0]},
		"/conversation?key=console:local": {"show me some markup", "purge_archive", chat.CodeOf(s.Approval.ID), "&lt;script&gt;"},
		"/approvals":                      {chat.CodeOf(s.Approval.ID), "purge_archive", "only console:local can answer"},
		"/people":                         {"console:local"},
		"/person?key=telegram:99":         {"secret plans of other", "other&#39;s private memory"},
		"/tools":                          {"scheduled_tasks", "load_tool_group", "Schema tokens"},
		"/tools?q=schedule+a+reminder":    {`class="found">- scheduled_tasks (scheduled_tasks)`},
		"/config":                         {"llm.model", "ui.admin_token", ">set<"},
	}
	for p, ws := range want {
		code, body := get(t, c, s.URL+p)
		if code != http.StatusOK {
			t.Errorf("%s: %d\n%s", p, code, body)
			continue
		}
		for _, w := range ws {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", p, w)
			}
		}
		if strings.Contains(body, "<script") {
			t.Errorf("%s holds a script element", p)
		}
	}
}

// Model text with markup is shown as text: escaped, never a tag.
func TestModelTextEscaped(t *testing.T) {
	s := newSite(t)
	c := client(t)
	s.operator(t, c)
	_, body := get(t, c, s.URL+"/conversation?key=console:local")
	if strings.Contains(body, "<script>") || strings.Contains(body, "<b>bold?</b>") ||
		!strings.Contains(body, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;") {
		t.Fatalf("the model's markup is not escaped:\n%s", body)
	}
}

// A person signed in by link sees their own things only: another's chat
// is 404, another's page and the operator's pages 403, another's task
// and memory cannot be touched; an answer to another's approval is
// refused.
func TestPersonSeesOnlyTheirOwn(t *testing.T) {
	s := newSite(t)
	c := client(t)
	token := s.person(t, c)
	_, home := get(t, c, s.URL+"/")
	for _, w := range []string{"water the plants", "likes green tea", chat.CodeOf(s.Approval.ID), "console:local"} {
		if !strings.Contains(home, w) {
			t.Errorf("the person's page lacks %q", w)
		}
	}
	for _, w := range []string{"secret plans", "private memory", s.Event.Ref()} {
		if strings.Contains(home, w) {
			t.Errorf("the person's page shows %q", w)
		}
	}
	refused := map[string]int{
		"/conversation?key=" + other: http.StatusNotFound,
		"/person?key=" + other:       http.StatusForbidden,
		"/people":                    http.StatusForbidden,
		"/tools":                     http.StatusForbidden,
		"/config":                    http.StatusForbidden,
	}
	for p, want := range refused {
		if code, body := get(t, c, s.URL+p); code != want || strings.Contains(body, "secret plans") {
			t.Errorf("%s: %d, want %d", p, code, want)
		}
	}
	if code, _ := get(t, c, s.URL+"/conversation?key="+me); code != http.StatusOK {
		t.Errorf("their own chat: %d", code)
	}
	// In the group both wrote in, other's personal result is not shown
	// to me; the operator sees it.
	code, body := get(t, c, s.URL+"/conversation?key="+group)
	if code != http.StatusOK || strings.Contains(body, otherMail) || !strings.Contains(body, "A personal result of telegram:99") {
		t.Errorf("the group chat as me: %d\n%s", code, body)
	}
	op := client(t)
	s.operator(t, op)
	if _, body := get(t, op, s.URL+"/conversation?key="+group); !strings.Contains(body, otherMail) {
		t.Errorf("the operator does not see the personal result")
	}
	ctx := context.Background()
	if code, _ := post(t, c, s.URL+"/tasks/act", url.Values{"csrf": {token}, "id": {strconv.FormatInt(s.TaskOther.ID, 10)}, "do": {"delete"}}); code != http.StatusForbidden {
		t.Errorf("deleting another's task: %d", code)
	}
	if _, err := s.Store.Task(ctx, s.TaskOther.ID); err != nil {
		t.Errorf("another's task is gone: %v", err)
	}
	mems, _ := s.Store.RecentMemories(ctx, other, 10)
	if code, _ := post(t, c, s.URL+"/memories/delete", url.Values{"csrf": {token}, "user": {other}, "id": {strconv.FormatInt(mems[0].ID, 10)}}); code != http.StatusForbidden {
		t.Errorf("deleting another's memory: %d", code)
	}
	if m, _ := s.Store.RecentMemories(ctx, other, 10); len(m) != 1 {
		t.Errorf("another's memory is gone")
	}
	for _, p := range []string{"/events/retry", "/events/drop"} {
		if code, _ := post(t, c, s.URL+p, url.Values{"csrf": {token}, "seq": {strconv.FormatInt(s.Event.Seq, 10)}}); code != http.StatusForbidden {
			t.Errorf("%s by a person: %d", p, code)
		}
	}
	// Their own memory and task they may change.
	mine, _ := s.Store.RecentMemories(ctx, me, 10)
	if code, _ := post(t, c, s.URL+"/memories/delete", url.Values{"csrf": {token}, "user": {me}, "id": {strconv.FormatInt(mine[0].ID, 10)}}); code != http.StatusSeeOther {
		t.Errorf("deleting their memory: %d", code)
	}
	if code, _ := post(t, c, s.URL+"/tasks/act", url.Values{"csrf": {token}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"pause"}}); code != http.StatusSeeOther {
		t.Errorf("pausing their task: %d", code)
	}
	if tk, _ := s.Store.Task(ctx, s.TaskMine.ID); !tk.NextRun.IsZero() {
		t.Errorf("the task is not paused: %v", tk.NextRun)
	}
	if code, _ := post(t, c, s.URL+"/tasks/act", url.Values{"csrf": {token}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"resume"}}); code != http.StatusSeeOther {
		t.Errorf("resuming their task: %d", code)
	}
	if tk, _ := s.Store.Task(ctx, s.TaskMine.ID); tk.NextRun.IsZero() {
		t.Error("the task is not resumed")
	}
	// Their Google account: shown, and disconnected from the page; the
	// operator may disconnect anyone's, a person no one else's.
	if !strings.Contains(home, "Connected") {
		t.Error("the person's page does not show their Google connection")
	}
	if code, _ := post(t, c, s.URL+"/google/revoke", url.Values{"csrf": {token}, "user": {other}}); code != http.StatusForbidden {
		t.Errorf("revoking another's Google: %d", code)
	}
	if code, _ := post(t, c, s.URL+"/google/revoke", url.Values{"csrf": {token}, "user": {me}}); code != http.StatusSeeOther {
		t.Errorf("revoking their Google: %d", code)
	}
	if _, ok, _, err := s.Google.Account(ctx, me); ok || err != nil {
		t.Errorf("still connected: %v", err)
	}
	// Run now hands it to its chat, as the schedule tool's run_now does.
	if code, _ := post(t, c, s.URL+"/tasks/act", url.Values{"csrf": {token}, "id": {strconv.FormatInt(s.TaskMine.ID, 10)}, "do": {"run"}}); code != http.StatusSeeOther {
		t.Errorf("running their task: %d", code)
	}
	if tk, _ := s.Store.Task(ctx, s.TaskMine.ID); tk.LastOutcome != "delivered to the chat" {
		t.Errorf("the task's run: %q", tk.LastOutcome)
	}
}

// The operator cannot answer a person's approval: only the person asked
// can, as in the chat. The person's answer from the page runs the held
// call once, and a second press changes nothing.
func TestApproveFromThePage(t *testing.T) {
	s := newSite(t)
	op := client(t)
	opToken := s.operator(t, op)
	form := func(csrf, answer string) url.Values {
		return url.Values{"csrf": {csrf}, "id": {s.Approval.ID}, "answer": {answer}}
	}
	if code, _ := post(t, op, s.URL+"/approvals/decide", form(opToken, "approve")); code != http.StatusForbidden {
		t.Fatalf("the operator answered a person's approval: %d", code)
	}
	p := client(t)
	token := s.person(t, p)
	if code, body := post(t, p, s.URL+"/approvals/decide", form(token, "approve")); code != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", code, body)
	}
	chattest.Eventually(t, "the held call runs and the chat hears the answer", func() bool {
		return s.Runs.Load() == 1 && strings.Contains(s.Out.String(), "The archive is gone.")
	})
	post(t, p, s.URL+"/approvals/decide", form(token, "approve"))
	post(t, p, s.URL+"/approvals/decide", form(token, "deny"))
	a, err := s.Store.ApprovalByID(context.Background(), s.Approval.ID)
	if err != nil || a.Status != chat.ApprovalDone || s.Runs.Load() != 1 {
		t.Fatalf("after more presses: %+v %v, %d runs", a, err, s.Runs.Load())
	}
	// The audit trail on the page records the decision once, with who
	// decided and what came of it.
	if _, body := get(t, p, s.URL+"/approvals"); strings.Count(body, "<td>approved</td><td>"+me+"</td><td>ran</td>") != 1 {
		t.Fatalf("the audit trail on the page:\n%s", body)
	}
	// An approval of a chat whose channel does not run here: a plain
	// sentence, nothing decided.
	if err := s.Store.Gorm().Exec(`INSERT INTO approvals (id, chat_key, session_id, user_key, call_id, tool_name, arguments, summary, tainted, status, created_at, expires_at)
		VALUES ('zzzz2222', 'slack:T1/C9', 0, ?, 'c9', 'purge_archive', '{}', 'Run purge_archive', false, 'pending', ?, ?)`,
		me, time.Now(), time.Now().Add(time.Hour)).Error; err != nil {
		t.Fatal(err)
	}
	code, body := post(t, p, s.URL+"/approvals/decide", url.Values{"csrf": {token}, "id": {"zzzz2222"}, "answer": {"approve"}})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Nothing was decided") {
		t.Fatalf("an approval of a chat not running here: %d %s", code, body)
	}
	if a, _ := s.Store.ApprovalByID(context.Background(), "zzzz2222"); a.Status != chat.ApprovalPending || s.Runs.Load() != 1 {
		t.Fatalf("it changed: %+v", a)
	}
}

// Bad parameters get a plain sentence naming them, never a crash.
func TestBadInput(t *testing.T) {
	s := newSite(t)
	c := client(t)
	token := s.operator(t, c)
	for p, want := range map[string]string{
		"/conversation":                                  `parameter &#34;key&#34; is missing`,
		"/conversation?key=nocolon":                      "must be a key",
		"/conversation?key=" + strings.Repeat("a:", 200): "must be a key",
		"/person?key=%ff%fe:1":                           "must be a key",
		"/tools?q=" + strings.Repeat("x", 300):           "at most 200",
		"/chats?after=" + strings.Repeat("x", 300):       "must be a chat key",
	} {
		code, body := get(t, c, s.URL+p)
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 400 with %q:\n%s", p, code, want, body)
		}
	}
	for p, f := range map[string]url.Values{
		"/approvals/decide": {"id": {"../x"}, "answer": {"approve"}},
		"/events/retry":     {"seq": {"-1"}},
		"/tasks/act":        {"id": {"1"}, "do": {"explode"}},
		"/memories/delete":  {"user": {me}, "id": {"abc"}},
	} {
		f.Set("csrf", token)
		if code, _ := post(t, c, s.URL+p, f); code != http.StatusBadRequest {
			t.Errorf("%s %v: %d", p, f, code)
		}
	}
	if code, _ := get(t, c, s.URL+"/conversation?key=telegram:404"); code != http.StatusNotFound {
		t.Errorf("a chat that does not exist: %d", code)
	}
}

// Retry puts a quarantined event back in line; drop ends it.
func TestQuarantineRetryDrop(t *testing.T) {
	s := newSite(t)
	c := client(t)
	token := s.operator(t, c)
	seq := strconv.FormatInt(s.Event.Seq, 10)
	if code, _ := post(t, c, s.URL+"/events/retry", url.Values{"csrf": {token}, "seq": {seq}}); code != http.StatusSeeOther {
		t.Fatalf("retry: %d", code)
	}
	ctx := context.Background()
	if ev, _ := s.Store.Quarantined(ctx, 10); len(ev) != 0 {
		t.Fatalf("still quarantined: %v", ev)
	}
	if un, _ := s.Store.Unfinished(ctx, "telegram"); len(un) != 1 {
		t.Fatalf("not back in line: %v", un)
	}
	if code, _ := post(t, c, s.URL+"/events/drop", url.Values{"csrf": {token}, "seq": {seq}}); code != http.StatusSeeOther {
		t.Fatalf("drop: %d", code)
	}
}
