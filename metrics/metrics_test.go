package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"loadout/bridge"
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
