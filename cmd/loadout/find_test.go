package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/chat/chattest"
	"loadout/tools"
)

// findCases are requests a person makes, written for loadout's tools,
// with the tool that does it.
var findCases = []struct{ query, tool string }{
	{"who emailed me about the invoice", "gmail_search"},
	{"add buy milk to my to-do list", "tasks_create"},
	{"what's left on my todo list", "tasks_list"},
	{"mark the rent task as done", "tasks_update"},
	{"find Ana's phone number", "contacts_search"},
	{"add Bob Ng to my contacts", "contacts_create"},
	{"add a paragraph under the Goals heading of the plan doc", "docs_write"},
	{"replace 2025 with 2026 everywhere in the document", "docs_replace"},
	{"what comments did people leave on my proposal doc", "docs_comments"},
	{"read cells A1 to D20 of the budget sheet", "sheets_read"},
	{"append a row to the expenses spreadsheet", "sheets_write"},
	{"add another tab to that spreadsheet", "sheets_tabs"},
	{"what do the slides of the Q1 deck say", "slides_read"},
	{"add a slide to the presentation", "slides_add"},
	{"make a survey form for the team lunch", "forms_create"},
	{"how did people answer the lunch survey", "forms_responses"},
	{"find emails from Ana last week", "gmail_search"},
	{"read the latest message from my boss", "gmail_read"},
	{"send an email to the team about Friday", "gmail_send"},
	{"reply to that email saying yes", "gmail_reply"},
	{"write a draft email to the landlord", "gmail_create_draft"},
	{"send the draft I wrote", "gmail_send_draft"},
	{"archive this email", "gmail_archive"},
	{"delete that email", "gmail_trash"},
	{"label the message as receipts", "gmail_modify_labels"},
	{"what labels do I have in gmail", "gmail_list_labels"},
	{"set an out of office reply while I'm on vacation", "gmail_set_vacation"},
	{"is my vacation responder on", "gmail_get_vacation"},
	{"change my email signature", "gmail_update_signature"},
	{"show my email signature", "gmail_get_signature"},
	{"create a filter so newsletters skip the inbox", "gmail_create_filter"},
	{"list my email filters", "gmail_list_filters"},
	{"delete the filter for newsletters", "gmail_delete_filter"},
	{"which addresses can I forward mail to", "gmail_list_forwarding_addresses"},
	{"move my 3pm meeting to Friday", "calendar_update_event"},
	{"what's on my calendar tomorrow", "calendar_list_events"},
	{"schedule a meeting with Ana on Monday at 10", "calendar_create_event"},
	{"cancel the dentist appointment", "calendar_delete_event"},
	{"when am I free on Thursday afternoon", "calendar_freebusy"},
	{"show the details of the board meeting event", "calendar_get_event"},
	{"which calendars do I have", "calendar_list_calendars"},
	{"find the budget spreadsheet in my drive", "drive_search"},
	{"read the project plan document in drive", "drive_read"},
	{"share the slides with bea@example.com", "drive_share"},
	{"create a folder for receipts in drive", "drive_create_folder"},
	{"save these notes as a new document in google drive", "drive_create_file"},
	{"move the report into the archive folder", "drive_move"},
	{"delete the old draft document from drive", "drive_trash"},
	{"get the details of this drive file", "drive_get"},
	{"search the web for the best ramen in Lisbon", "web"},
	{"open this link and summarize the page", "web"},
	{"read the article at this url", "web"},
	{"call the weather API with this endpoint", "http_request"},
	{"make a POST request to our webhook", "http_request"},
	{"remember that my daughter is called Rita", "memory"},
	{"what do you remember about me", "memory"},
	{"forget my old address", "memory"},
	{"what did we decide about the budget last week", "search_history"},
	{"find what I said earlier about the trip", "search_history"},
	{"what time is it in Tokyo", "get_current_time"},
	{"what is today's date", "get_current_time"},
	{"remind me every morning to drink water", "scheduled_tasks"},
	{"run this task daily at 8", "scheduled_tasks"},
	{"how many pages does this pdf have", "pdf_info"},
	{"extract the text of the pdf invoice", "pdf_text"},
	{"show page 2 of the pdf as an image", "pdf_render"},
	{"save this text to a file in the workspace", "files"},
	{"list the files I sent you", "files"},
	{"send me the file you made", "files"},
	{"run the python script", "exec"},
	{"change your name to Ada", "agent_config"},
	{"disable the email sending tool in this chat", "tool_settings"},
	{"create a new tool that calls our stock API", "custom_tools"},
	{"show the skill for expense reports", "load_skill"},
	{"delete the file report.txt from the workspace", "files"},
}

// BenchmarkFindTools measures find_tools' retrieval on findCases over
// every tool loadout has (Google's included), and how long the index and
// a query take.
//
//	go test -run '^$' -bench FindTools -benchtime 1x ./cmd/loadout/
func BenchmarkFindTools(b *testing.B) {
	cfg, _ := parseConfig(nil, env(map[string]string{"LOADOUT_EXEC_ENABLED": "true", "LOADOUT_EXEC_ALLOW": "python3"}))
	cfg.Store.Path = filepath.Join(b.TempDir(), "x.db")
	dir := b.TempDir()
	cfg.Skills.Dir = dir
	writeSkill(b, dir)
	a, err := buildApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		b.Fatal(err)
	}
	defer a.db.Close()
	find, _ := a.reg.Tool(tools.FindToolsName)
	x := tools.NewExecutor(a.reg, nil)
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "console:local", UserKey: "console:local"})
	run := func(q string) string {
		return x.Run(ctx, nil, []tools.Call{{ID: "1", Name: find.Name, Arguments: `{"query":"` + q + `","limit":5}`}})[0].Content
	}
	start := time.Now()
	run("warm the index") // builds it
	index := time.Since(start)
	var at1, at5 int
	var misses []string
	start = time.Now()
	for i := 0; i < b.N; i++ {
		at1, at5, misses = 0, 0, nil
		for _, c := range findCases {
			lines := strings.Split(run(c.query), "\n")
			for rank, l := range lines {
				if strings.HasPrefix(l, "- "+c.tool+" (") {
					if rank == 0 {
						at1++
					}
					at5++
					break
				}
				if rank == 4 {
					break
				}
			}
			if !strings.Contains(strings.Join(lines, "\n"), "- "+c.tool+" (") {
				misses = append(misses, c.query+" → "+c.tool)
			}
		}
	}
	per := time.Since(start) / time.Duration(b.N*len(findCases))
	n := float64(len(findCases))
	b.ReportMetric(float64(at1)/n, "recall@1")
	b.ReportMetric(float64(at5)/n, "recall@5")
	b.ReportMetric(float64(index.Microseconds())/1000, "index-ms")
	b.ReportMetric(float64(per.Microseconds()), "µs/query")
	if len(misses) > 0 {
		b.Logf("not in the top five: %s", strings.Join(misses, "; "))
	}
}

// find_tools with load loads the groups of what it found, recorded so a
// restart restores them, like load_tool_group.
func TestFindToolsLoadsGroups(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "")
	model.Call("find_tools", `{"query":"read a pdf's text","load":true}`)
	model.Text("Ready.")
	if out, err := runCLI(t, "can you read pdfs?\n", "-config", cfgPath, "chat"); err != nil || !strings.Contains(out, "Ready.") {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := lastToolResult(model); !strings.Contains(got, "- pdf_text (pdf):") || !strings.Contains(got, "Loaded groups: ") || !strings.Contains(got, "pdf.") {
		t.Fatalf("find_tools gave %s", got)
	}
	model.Text("Still loaded.")
	if _, err := runCLI(t, "and now?\n", "-config", cfgPath, "chat"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(chattest.ToolNames(model.Last(t)), " "); !strings.Contains(got, "pdf_text") {
		t.Errorf("after a restart the request offered %s", got)
	}
}
