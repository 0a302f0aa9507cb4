package telegram

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// hardStop is a configuration whose shutdown cancels at once: nothing in
// flight is allowed to finish, as when the process is killed.
func hardStop(c *Config) { c.ShutdownGrace = time.Nanosecond }

// restart starts a second adapter on the first one's database and model,
// as a new process would.
func (h *harness) restart() *storetest.Env {
	env2 := storetest.NewEnv(h.t, storetest.Options{DBPath: h.env.DBPath, Model: h.env.Model})
	h.start(env2, h.config(nil))
	return env2
}

// itemState is the inbox state of an update.
func itemState(env *storetest.Env, id int) string {
	var s string
	env.Store.Gorm().Raw("SELECT state FROM inbox_items WHERE event_id = ?", updateRef(int64(id))).Scan(&s)
	return s
}

func userMessages(env *storetest.Env, text string) int {
	var n int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE role = 'user' AND text = ?", text).Scan(&n)
	return n
}

// Stopped after the update is stored but before Telegram learned it was
// received (the offset never reached it, and was lost on our side too):
// Telegram delivers the update again and the inbox resumes it; it is
// answered once.
func TestCrashAfterPersistBeforeAck(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Push(chattest.Step{Text: "never delivered", Delay: time.Minute})
	id := h.tg.Push(telegramtest.Message{From: ana, Text: "are you there?"})
	h.tg.Hold("getUpdates", 1) // the confirming poll never gets through
	_, stop := h.start(h.env, h.config(hardStop))
	chattest.Eventually(t, "the turn to start", func() bool { return len(h.env.Model.Requests()) == 1 })
	stop()
	if state := itemState(h.env, id); state != "pending" {
		t.Fatalf("inbox state %q after the crash, want pending", state)
	}
	h.env.Store.Gorm().Exec("DELETE FROM states WHERE key = ?", offsetKey)
	// The abandoned poll must be over before the server may answer it.
	h.tg.WaitFor(t, "the abandoned poll to end", func() bool { return h.tg.Waiting("getUpdates") == 0 })
	h.tg.Resume("getUpdates")

	h.env.Model.Text("yes, here")
	// The first process may have been stopped before it polled again, so
	// the polls are counted from the restart: one takes the redelivered
	// update, the next confirms it.
	polls := len(h.tg.Calls("getUpdates"))
	env2 := h.restart()
	sent := h.tg.WaitSent(t, 1)
	h.tg.WaitFor(t, "offset confirmed", func() bool { return h.tg.Confirmed(id) })
	chattest.Eventually(t, "the redelivered update to be seen", func() bool {
		return len(h.tg.Calls("getUpdates")) >= polls+2
	})
	if sent = h.tg.Sent(); len(sent) != 1 || sent[0].Text != "yes, here" {
		t.Fatalf("sent %+v, want one answer", sent)
	}
	if n := userMessages(env2, "are you there?"); n != 1 {
		t.Fatalf("the message is in the history %d times, want 1", n)
	}
}

// An update Telegram sends again after a lost offset, when its answer
// already went out, is not answered again.
func TestUpdateRedeliveredAfterLostOffsetIsAnsweredOnce(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("first and only")
	_, stop := h.start(h.env, h.config(nil))
	id := h.tg.Push(telegramtest.Message{From: ana, Text: "hello once"})
	h.tg.WaitSent(t, 1)
	chattest.Eventually(t, "the item done", func() bool { return itemState(h.env, id) == "done" })
	stop()
	// Our offset is lost, and Telegram still has the update queued.
	h.env.Store.Gorm().Exec("DELETE FROM states WHERE key = ?", offsetKey)
	h.tg.Requeue(id, telegramtest.Message{From: ana, Text: "hello once"})

	h.env.Model.Text("answer to the next")
	h.restart()
	h.tg.WaitFor(t, "the update redelivered and confirmed", func() bool { return h.tg.Confirmed(id) })
	last := h.tg.Push(telegramtest.Message{From: ana, Text: "next"})
	h.tg.WaitFor(t, "the next update confirmed", func() bool { return h.tg.Confirmed(last) })
	sent := h.tg.WaitSent(t, 2)
	if len(sent) != 2 || sent[0].Text != "first and only" || sent[1].Text != "answer to the next" {
		t.Fatalf("sent %+v, want the first answer once and then the answer to the next message", sent)
	}
	if n := len(h.env.Model.Requests()); n != 2 {
		t.Fatalf("model called %d times, want 2", n)
	}
}

// Stopped between two parts of a long reply: after the restart the rest
// goes out in order, and no part that went out is sent again.
func TestCrashBetweenPartsResumesAtFirstUnsentPart(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	var b strings.Builder
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "Part %d begins. %s\n\n", i, strings.Repeat("word ", 900))
	}
	h.env.Model.Text(b.String())
	if n := len(Chunks(b.String(), MaxMessage)); n < 3 {
		t.Fatalf("the answer splits into %d parts; make it longer", n)
	}
	h.tg.Hold("sendMessage", 1)
	_, stop := h.start(h.env, h.config(hardStop))
	h.tg.Push(telegramtest.Message{From: ana, Text: "tell me a lot"})
	h.tg.WaitFor(t, "the second part to be held", func() bool { return h.tg.Waiting("sendMessage") == 1 })
	stop()
	h.tg.WaitFor(t, "the abandoned send to end", func() bool { return h.tg.Waiting("sendMessage") == 0 })
	h.tg.Resume("sendMessage")
	if n := len(h.tg.Sent()); n != 1 {
		t.Fatalf("%d parts sent before the restart, want 1", n)
	}

	env2 := h.restart()
	want := Chunks(b.String(), MaxMessage)
	h.tg.WaitSent(t, len(want))
	chattest.Eventually(t, "the item done", func() bool {
		var s string
		env2.Store.Gorm().Raw("SELECT state FROM inbox_items WHERE channel = 'telegram'").Scan(&s)
		return s == "done"
	})
	sent := h.tg.Sent()
	if len(sent) != len(want) {
		t.Fatalf("sent %d parts, want %d (none twice)", len(sent), len(want))
	}
	for i, s := range sent {
		if !strings.Contains(s.Text, strings.TrimSpace(want[i][:20])) {
			t.Fatalf("part %d out of order: %.40q", i, s.Text)
		}
	}
	if n := len(h.env.Model.Requests()); n != 1 {
		t.Fatalf("model called %d times, want 1", n)
	}
}

// A panic while reading one update (here forced through a hostile entity)
// never takes the channel down; later updates are answered.
func TestHostileEntitiesDoNotStopPolling(t *testing.T) {
	h := newHarness(t, storetest.Options{})
	h.env.Model.Text("still fine")
	h.start(h.env, h.config(nil))
	h.tg.PushRaw(fmt.Sprintf(`{"message":{"message_id":5,"date":1,"text":"@loadout_bot hi","chat":{"id":%d,"type":"supergroup"},
		"from":{"id":42,"is_bot":false,"first_name":"Ana","username":"ana"},
		"entities":[{"type":"mention","offset":0,"length":-5},{"type":"mention","offset":3,"length":99},{"type":"mention","offset":-2,"length":1}]}}`, group))
	h.tg.Push(telegramtest.Message{From: ana, Text: "hello"})
	sent := h.tg.WaitSent(t, 1)
	if sent[len(sent)-1].Text != "still fine" {
		t.Fatalf("sent %+v", sent)
	}
}

// Entity offsets and lengths come from the sender; bad ones are skipped,
// never sliced with.
func TestAddressedIgnoresBadEntities(t *testing.T) {
	self := tgbotapi.User{ID: telegramtest.BotID, UserName: telegramtest.BotUserName}
	for _, ents := range [][]tgbotapi.MessageEntity{
		{{Type: "mention", Offset: 0, Length: -5}},
		{{Type: "mention", Offset: -2, Length: 1}},
		{{Type: "mention", Offset: 3, Length: 99}},
		{{Type: "mention", Offset: 1 << 62, Length: 1 << 62}},
		{{Type: "mention", Offset: 0, Length: 12}, {Type: "mention", Offset: 4, Length: 12}},
	} {
		m := &message{Message: tgbotapi.Message{Text: "@loadout_bot hi 👋", Entities: ents}}
		text, ok := addressed(self, m)
		if ok && text == "" {
			t.Errorf("entities %+v: addressed with empty text", ents)
		}
	}
	m := &message{Message: tgbotapi.Message{Text: "👋 @loadout_bot hi", Entities: []tgbotapi.MessageEntity{{Type: "mention", Offset: 3, Length: 12}}}}
	if text, ok := addressed(self, m); !ok || text != "👋 hi" {
		t.Fatalf("addressed = %q, %v; want the mention removed after a surrogate pair", text, ok)
	}
}
