package main

import (
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
)

// On Telegram, the model schedules a task and runs it now: the task's
// prompt is run in the same chat after the current turn, and its answer
// is delivered there.
func TestScheduledTaskOnTelegram(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	serveTelegram(t, tg, model, "")
	at := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	model.Call("load_tool_group", `{"group_name":"scheduled_tasks"}`)
	model.Call("scheduled_tasks", `{"action":"schedule","prompt":"tell me the weather","at":"`+at+`"}`)
	model.Call("scheduled_tasks", `{"action":"run_now","id":1}`)
	model.Text("Scheduled, and ran it once now.")
	model.Text("Task answer: sunny.")
	tg.Push(telegramtest.Message{From: telegramtest.User{ID: 42}, Text: "every morning tell me the weather"})
	sent := tg.WaitSent(t, 2)
	if sent[0].Text != "Scheduled, and ran it once now." || sent[1].Text != "Task answer: sunny." || sent[1].ChatID != 42 {
		t.Fatalf("sent %+v", sent)
	}
	reqs := model.Requests()
	task := reqs[len(reqs)-1].Messages
	if got := task[len(task)-1].Content; !strings.HasPrefix(got, "[Scheduled task 1, run unattended") || !strings.HasSuffix(got, "tell me the weather") {
		t.Errorf("the task's turn got %q", got)
	}
	// It ran in the chat's own session: the scheduled_tasks group loaded
	// by the first turn is loaded for it.
	if !strings.Contains(strings.Join(chattest.ToolNames(reqs[len(reqs)-1]), " "), "scheduled_tasks") {
		t.Errorf("the task's turn was offered %v", chattest.ToolNames(reqs[len(reqs)-1]))
	}
}
