package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

type noInbox struct{}

func (noInbox) InboxStats(context.Context) ([]bridge.InboxStat, error) { return nil, nil }

// The group loads are read from the results' Groups: what load_tool_group
// and find_tools with load loaded counts, an unload does not, and the
// call's arguments are not read (a find_tools call names no group).
func TestToolsCountsGroupsTheResultsLoaded(t *testing.T) {
	reg := tools.NewRegistry()
	for _, g := range []string{"pdf", "drive", "gmail"} {
		if err := reg.AddGroup(tools.Group{Name: g, Description: g}); err != nil {
			t.Fatal(err)
		}
	}
	results := map[string]tools.Result{
		tools.LoadGroupName:   {Status: tools.StatusSuccess, Groups: tools.LoadChanges("pdf")},
		tools.FindToolsName:   {Status: tools.StatusSuccess, Groups: tools.LoadChanges("drive", "gmail")},
		tools.UnloadGroupName: {Status: tools.StatusSuccess, Groups: []tools.GroupChange{{Name: "gmail", Unload: true}}},
		"failed":              {Status: tools.StatusError, Groups: tools.LoadChanges("pdf")},
		"renamed":             {Status: tools.StatusSuccess, Groups: tools.LoadChanges("no_such_group")},
	}
	m := New(noInbox{})
	h := m.Tools(reg)(func(_ context.Context, c tools.Call) tools.Result { return results[c.Name] })
	for _, name := range []string{tools.LoadGroupName, tools.FindToolsName, tools.UnloadGroupName, "failed", "renamed"} {
		h(context.Background(), tools.Call{Name: name, Arguments: `{"query":"files"}`})
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	var got []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "loadout_group_loads_total{") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`loadout_group_loads_total{group="drive"} 1`,
		`loadout_group_loads_total{group="gmail"} 1`,
		`loadout_group_loads_total{group="pdf"} 1`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("group loads:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Each charge adds to its person's and its chat's series, each labelled
// by one key only; a charge with no price adds no cost.
func TestChargedCountsSpendByPersonAndChat(t *testing.T) {
	m := New(noInbox{})
	m.Charged(chat.Charge{UserKey: "telegram:1", ChatKey: "telegram:-5", Spend: chat.Spend{PromptTokens: 100, CompletionTokens: 20, Cost: 0.25}})
	m.Charged(chat.Charge{UserKey: "telegram:2", ChatKey: "telegram:-5", Spend: chat.Spend{PromptTokens: 10, CompletionTokens: 5}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`loadout_spend_person_tokens_total{person="telegram:1"} 120`,
		`loadout_spend_person_tokens_total{person="telegram:2"} 15`,
		`loadout_spend_chat_tokens_total{chat="telegram:-5"} 135`,
		`loadout_spend_person_cost_total{person="telegram:1"} 0.25`,
		`loadout_spend_chat_cost_total{chat="telegram:-5"} 0.25`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), `loadout_spend_person_cost_total{person="telegram:2"}`) {
		t.Error("a charge without a price made a cost series")
	}
}

// The console's overview reads the errors since start from the
// counters: failed and quarantined messages, refused sends and failed
// tool calls, each counted, the largest first, and nothing that did not
// happen.
func TestErrorsCountWhatWentWrong(t *testing.T) {
	m := New(noInbox{})
	if got, err := m.Errors(); err != nil || len(got) != 0 {
		t.Fatalf("a new process's errors = %v, %v", got, err)
	}
	m.Turn("telegram", bridge.OutcomeFailed, 0)
	m.Turn("slack", bridge.OutcomeFailed, 0)
	m.Turn("slack", bridge.OutcomeQuarantined, 0)
	m.Turn("telegram", bridge.OutcomeAnswered, 0)
	m.Sent("telegram", false)
	m.Sent("telegram", true)
	got, err := m.Errors()
	want := []string{"2 messages failed", "1 message quarantined", "1 answer part the platform refused"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("errors = %q, %v; want %q", got, err, want)
	}
}
