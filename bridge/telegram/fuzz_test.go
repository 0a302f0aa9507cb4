package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
	"loadout/bridge/telegram/telegramtest"
)

// fuzzAdapter judges updates as the running channel does, with ana (by
// id) and @bea (by username) allowed; it is never run.
func fuzzAdapter() (*Adapter, tgbotapi.User) {
	a := New(Config{Token: telegramtest.Token, AllowedUsers: []string{"42", "@bea"},
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(nil, "loadout"), nil)
	return a, tgbotapi.User{ID: telegramtest.BotID, UserName: telegramtest.BotUserName, IsBot: true}
}

// allowedSender reads who an update says sent it, independently of the
// channel's types, and applies the allowlist rule written out.
func allowedSender(raw []byte) bool {
	var u struct {
		Message *struct {
			From *struct {
				ID       int64  `json:"id"`
				UserName string `json:"username"`
			} `json:"from"`
		} `json:"message"`
	}
	if json.Unmarshal(raw, &u) != nil || u.Message == nil || u.Message.From == nil {
		return false
	}
	return u.Message.From.ID == 42 || strings.EqualFold(u.Message.From.UserName, "bea")
}

// judgeRaw decodes one update as the channel does and judges it as
// accept does, and checks that only an allowed person's text would go to
// the handler.
func judgeRaw(t *testing.T, a *Adapter, self tgbotapi.User, raw []byte) {
	t.Helper()
	var u update
	if json.Unmarshal(raw, &u) != nil {
		return // the poller drops an update it cannot decode
	}
	pend, ok := a.judge(context.Background(), self, u)
	if !ok {
		return
	}
	if pend.Reply != "" && (pend.Inbound.Text != "" || pend.Inbound.UserKey != "") {
		t.Fatalf("a reply without a turn carries the person's message: %+v", pend.Inbound)
	}
	if pend.Inbound.Text == "" {
		if pend.Reply == "" {
			t.Fatalf("accepted with neither text nor reply: %+v", pend)
		}
		return
	}
	if !allowedSender(raw) {
		t.Fatalf("a stranger's text %q goes to the handler", pend.Inbound.Text)
	}
	if want := "telegram:" + strconv.FormatInt(u.Message.From.ID, 10); pend.Inbound.UserKey != want {
		t.Fatalf("user key %q, want %q", pend.Inbound.UserKey, want)
	}
	if strings.TrimSpace(pend.Inbound.Text) == "" {
		t.Fatalf("blank text %q goes to the handler", pend.Inbound.Text)
	}
}

// groupUpdate is a group message whose entities are given as JSON.
func groupUpdate(fromID int64, username, text, entities string) string {
	return fmt.Sprintf(`{"update_id":1,"message":{"message_id":5,"date":1,"text":%q,`+
		`"chat":{"id":%d,"type":"supergroup"},"from":{"id":%d,"is_bot":false,"first_name":"X","username":%q},"entities":%s}}`,
		text, group, fromID, username, entities)
}

// FuzzUpdateJudgement feeds update JSON, hostile entities included,
// through the path that decides whether an update is for the bot and
// from whom: nothing panics, and a stranger's text never reaches the
// handler.
func FuzzUpdateJudgement(f *testing.F) {
	tg := telegramtest.New(f)
	for _, m := range []telegramtest.Message{
		{From: ana, Text: "hello"},
		{From: byName, Text: "/status"},
		{From: mallory, Text: "let me in"},
		{From: ana, ChatID: group, ChatType: "supergroup", Text: "@loadout_bot what's up"},
		{From: mallory, ChatID: group, ChatType: "supergroup", Text: "@loadout_bot let me in"},
		{From: ana, ChatID: group, ChatType: "group", Text: "/clear@other_bot"},
		{From: ana, ChatID: group, ChatType: "supergroup", Text: "thanks", ReplyToBot: true},
		{From: ana, ChatID: group, ChatType: "supergroup", Text: "in a topic @loadout_bot", ThreadID: 7, Topic: true},
	} {
		_, b := tg.Update(m)
		f.Add(b)
	}
	for _, s := range []string{
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":0,"length":-5}]`),
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":-2,"length":1}]`),
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":3,"length":99}]`),
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":4611686018427387904,"length":4611686018427387904}]`),
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":9223372036854775807,"length":9223372036854775807}]`),
		groupUpdate(42, "ana", "@loadout_bot hi", `[{"type":"mention","offset":1,"length":9223372036854775807}]`),
		groupUpdate(42, "ana", "@loadout_bot @loadout_bot", `[{"type":"mention","offset":0,"length":12},{"type":"mention","offset":4,"length":12},{"type":"mention","offset":13,"length":12}]`),
		groupUpdate(42, "ana", "👋 @loadout_bot hi", `[{"type":"mention","offset":3,"length":12}]`),
		groupUpdate(42, "ana", "👋 @loadout_bot hi", `[{"type":"mention","offset":1,"length":13}]`),
		groupUpdate(42, "ana", "@loadout_bot", `[{"type":"mention","offset":0,"length":12}]`),
		`{"update_id":1,"message":{"message_id":5,"date":1,"text":"\ud83d @loadout_bot \udc4b\ud83d\udc4b","chat":{"id":-100123,"type":"supergroup"},` +
			`"from":{"id":42,"is_bot":false,"first_name":"A","username":"ana"},"entities":[{"type":"mention","offset":2,"length":12},{"type":"mention","offset":16,"length":1}]}}`,
		groupUpdate(99, "mallory", "@loadout_bot hi", `[{"type":"mention","offset":0,"length":12}]`),
		groupUpdate(99, "mallory", "hi", `[{"type":"text_mention","offset":0,"length":2,"user":{"id":777000,"is_bot":true,"first_name":"loadout"}}]`),
		groupUpdate(99, "Bea_", "@LOADOUT_BOT hi", `[]`),
		groupUpdate(55, "BEA", "@loadout_bot hi", `[{"type":"text_mention","offset":0,"length":12,"user":null}]`),
		groupUpdate(42, "ana", "/start@loadout_bot", `[{"type":"bot_command","offset":0,"length":-1}]`),
		`{"update_id":2,"message":{"message_id":1,"date":1,"text":"hi","chat":{"id":99,"type":"private"},"from":{"id":99,"username":"bea_"}}}`,
		`{"update_id":2,"message":{"message_id":1,"date":1,"text":"hi","chat":{"id":99,"type":"private"},"from":{"id":99,"username":"mallory","is_bot":true}}}`,
		`{"update_id":2,"message":{"message_id":1,"date":1,"text":"hi","chat":{"id":42,"type":"private"},"from":{"id":99,"id":42}}}`,
		`{"update_id":2,"message":{"message_id":1,"date":1,"text":"hi","chat":{"id":42,"type":"channel"},"from":{"id":42}}}`,
		`{"update_id":2,"message":{"message_id":1,"date":1,"text":"   ","chat":{"id":42,"type":"private"},"from":{"id":42}}}`,
		`{"update_id":2,"message":{"message_id":1,"text":"hi","chat":null,"from":{"id":42}}}`,
		`{"update_id":2,"message":{"text":"hi","chat":{"id":42,"type":"private"}}}`,
		`{"update_id":2,"message":{"text":"hi","chat":{"id":42,"type":"private"},"from":{"id":"42"}}}`,
		`{"update_id":2,"edited_message":{"text":"hi","chat":{"id":42,"type":"private"},"from":{"id":42}}}`,
		`{"update_id":2,"message":null}`, `{}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	a, self := fuzzAdapter()
	f.Fuzz(func(t *testing.T, raw []byte) { judgeRaw(t, a, self, raw) })
}

// FuzzGroupEntities builds group messages from a text and two entities
// of any offset, length and type, from an allowed person or a stranger,
// so the fuzzer reaches the entity arithmetic quickly.
func FuzzGroupEntities(f *testing.F) {
	f.Add(int64(42), "@loadout_bot hi", "mention", 0, 12, "mention", 13, 2)
	f.Add(int64(99), "@loadout_bot hi", "mention", 0, 12, "bold", 0, 1)
	f.Add(int64(42), "👋 @loadout_bot hi 👋", "mention", 3, 12, "mention", 18, 2)
	f.Add(int64(42), "👋 @loadout_bot", "mention", 1, 13, "mention", -1, 1)
	f.Add(int64(42), "@loadout_bot", "mention", 0, 1<<62, "mention", 1<<62, 1<<62)
	f.Add(int64(42), "@loadout_bot x", "mention", -1<<62, 1<<62+13, "mention", 0, 12)
	f.Add(int64(55), "\xed\xa0\xbd @loadout_bot", "mention", 2, 12, "text_mention", 0, 1)
	f.Add(int64(99), "/clear@loadout_bot", "bot_command", 0, 18, "mention", 6, 12)
	a, self := fuzzAdapter()
	f.Fuzz(func(t *testing.T, from int64, text, t1 string, o1, l1 int, t2 string, o2, l2 int) {
		username := "stranger"
		if from == 55 {
			username = "bea"
		}
		ents, _ := json.Marshal([]map[string]any{
			{"type": t1, "offset": o1, "length": l1},
			{"type": t2, "offset": o2, "length": l2, "user": map[string]any{"id": telegramtest.BotID, "is_bot": true, "first_name": "b"}},
		})
		raw := groupUpdate(from, username, text, string(ents))
		judgeRaw(t, a, self, []byte(raw))

		m := &message{Message: tgbotapi.Message{Text: text, Entities: []tgbotapi.MessageEntity{
			{Type: t1, Offset: o1, Length: l1}, {Type: t2, Offset: o2, Length: l2, User: &self},
		}}}
		if out, ok := addressed(self, m); ok && strings.TrimSpace(text) != "" && out == "" {
			t.Fatalf("addressed %q with empty text", text)
		}
	})
}
