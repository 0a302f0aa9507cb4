package clock

import (
	"context"
	"strings"
	"testing"
	"time"

	"loadout/tools"
)

func call(t *testing.T, args string) tools.Result {
	r := tools.NewRegistry()
	fixed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := r.Add(Tool(func() time.Time { return fixed })); err != nil {
		t.Fatal(err)
	}
	return tools.NewExecutor(r, nil).Run(context.Background(), nil, []tools.Call{{ID: "1", Name: "get_current_time", Arguments: args}})[0]
}

func TestCurrentTime(t *testing.T) {
	if r := call(t, `{}`); r.Status != tools.StatusSuccess || !strings.Contains(r.Content, `"time":"2026-03-01T12:00:00Z"`) {
		t.Errorf("UTC: %+v", r)
	}
	r := call(t, `{"time_zone":"America/Sao_Paulo"}`)
	if r.Status != tools.StatusSuccess || !strings.Contains(r.Content, "2026-03-01T09:00:00-03:00") || !strings.Contains(r.Content, "Sunday") {
		t.Errorf("Sao Paulo: %+v", r)
	}
	for _, bad := range []string{`{"time_zone":"Mars/Olympus"}`, `{"time_zone":"Local"}`} {
		if r := call(t, bad); r.Code != tools.CodeInvalidArgument || !strings.Contains(r.Content, "IANA") {
			t.Errorf("%s: %+v", bad, r)
		}
	}
}
