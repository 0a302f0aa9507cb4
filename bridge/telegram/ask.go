package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools"
)

// Callback data of the approval buttons: "ok:<approval id>:<user id>",
// "no:…" or "al:…" (Always allow), at most 64 bytes as Telegram allows.
// The user id is the only person whose press counts; the engine checks
// it again.
const (
	dataApprove = "ok"
	dataDeny    = "no"
	dataAlways  = "al"
	// dataAnswer is a choice of a running tool's question:
	// "an:<code>:<n>:<user id>".
	dataAnswer = "an"
)

// maxChoiceButtons is the most choices shown as buttons; a question with
// more lists them in its text, answered by number.
const maxChoiceButtons = 12

// Choose sends a running tool's question with a button per choice, one
// a row; a press is the presser's "/answer <code> <n>", which only user
// may send (others are refused at the press).
func (a *Adapter) Choose(ctx context.Context, route any, text, code, user string, choices []string) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	uid := strings.TrimPrefix(user, "telegram:")
	if len(choices) > maxChoiceButtons {
		for i, c := range choices {
			text += fmt.Sprintf("\n%d. %s", i+1, c)
		}
		return a.deliver(ctx, r, nil, text, "")
	}
	var rows [][]map[string]string
	for i, c := range choices {
		rows = append(rows, []map[string]string{{"text": tools.Shorten(c, 60),
			"callback_data": fmt.Sprintf("%s:%s:%d:%s", dataAnswer, strings.TrimPrefix(code, "#"), i+1, uid)}})
	}
	kb, _ := json.Marshal(map[string]any{"inline_keyboard": rows})
	return a.deliver(ctx, r, nil, text, string(kb))
}

// Ask sends a question that waits for the person's approval, as a
// message of its own, with Approve and Deny buttons under it labelled
// with its code, and Always allow where the question offers it.
func (a *Adapter) Ask(ctx context.Context, route any, part string, q bridge.Question, user string) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	uid := strings.TrimPrefix(user, "telegram:")
	row := []map[string]string{
		{"text": "Approve " + chat.CodeOf(q.ID), "callback_data": dataApprove + ":" + q.ID + ":" + uid},
		{"text": "Deny " + chat.CodeOf(q.ID), "callback_data": dataDeny + ":" + q.ID + ":" + uid},
	}
	rows := [][]map[string]string{row}
	if q.Always != "" {
		rows = append(rows, []map[string]string{{"text": "Always allow " + chat.CodeOf(q.ID), "callback_data": dataAlways + ":" + q.ID + ":" + uid}})
	}
	kb, _ := json.Marshal(map[string]any{"inline_keyboard": rows})
	return a.deliver(ctx, r, nil, part+bridge.AskLine(q), string(kb))
}

// judgeClick turns a press of Approve or Deny into the chat's /approve or
// /deny from the person who pressed. A press by anyone but the person
// asked is refused there and then, and never reaches the chat; an
// accepted one is acknowledged by chosen once it is stored.
func (a *Adapter) judgeClick(ctx context.Context, q *callbackQuery) (bridge.Pending, bool) {
	if q.From == nil || q.Message == nil || q.Message.Chat == nil {
		return bridge.Pending{}, false
	}
	if verb, _, _ := pressOf(q); verb == dataAnswer {
		return a.judgeChoice(ctx, q)
	}
	verb, id, owner := pressOf(q)
	if (verb != dataApprove && verb != dataDeny && verb != dataAlways) || id == "" {
		a.answerClick(ctx, q.ID, "", false)
		return bridge.Pending{}, false
	}
	from := strconv.FormatInt(q.From.ID, 10)
	if !a.allow.Allowed(from, q.From.UserName) || from != owner {
		a.log.Warn("telegram: refused a button press by someone other than the person asked", "user_id", from, "chat_id", q.Message.Chat.ID)
		a.answerClick(ctx, q.ID, bridge.TextNotYours, true)
		return bridge.Pending{}, false
	}
	command := "/approve "
	switch verb {
	case dataDeny:
		command = "/deny "
	case dataAlways:
		command = "/always "
	}
	r, chatKey := chatOf(q.Message)
	// A press that cannot count (expired, answered, forged) is refused
	// here, to the presser alone; the question changes only when the
	// request really ended.
	if can, err := a.router.Answerable(ctx, chatKey, "telegram:"+from, id); err != nil || !can.OK {
		why := can.Why
		if err != nil {
			a.log.Error("telegram: could not check a button press", "chat_id", q.Message.Chat.ID, "err", err)
			why = "Sorry, I could not check that request just now. Please press again in a moment."
		}
		a.answerClick(ctx, q.ID, why, true)
		if can.Ended {
			a.closeQuestion(ctx, q, why)
		}
		return bridge.Pending{}, false
	}
	return bridge.Pending{
		ID:      "callback:" + q.ID,
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "telegram:" + from, Text: command + id},
		Route:   r.encode(),
	}, true
}

// judgeChoice turns a press of a question's choice into the presser's
// "/answer <code> <n>"; a press by anyone but the person asked is refused
// there and then. Whether a question still waits is the pipeline's to
// say: a late press reaches the router, which says none does.
func (a *Adapter) judgeChoice(ctx context.Context, q *callbackQuery) (bridge.Pending, bool) {
	parts := strings.Split(q.Data, ":")
	if len(parts) != 4 || parts[1] == "" {
		a.answerClick(ctx, q.ID, "", false)
		return bridge.Pending{}, false
	}
	from := strconv.FormatInt(q.From.ID, 10)
	if !a.allow.Allowed(from, q.From.UserName) || from != parts[3] {
		a.log.Warn("telegram: refused a button press by someone other than the person asked", "user_id", from, "chat_id", q.Message.Chat.ID)
		a.answerClick(ctx, q.ID, bridge.TextNotYours, true)
		return bridge.Pending{}, false
	}
	r, chatKey := chatOf(q.Message)
	if !a.pipe.Asks(ctx, chatKey, "telegram:"+from, parts[1]) {
		a.answerClick(ctx, q.ID, bridge.TextNoQuestion, true)
		return bridge.Pending{}, false
	}
	return bridge.Pending{
		ID:      "callback:" + q.ID,
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "telegram:" + from, Text: "/answer " + parts[1] + " " + parts[2]},
		Route:   r.encode(),
	}, true
}

// pressOf reads a button's data: verb:approval:owner.
func pressOf(q *callbackQuery) (verb, id, owner string) {
	verb, rest, _ := strings.Cut(q.Data, ":")
	id, owner, _ = strings.Cut(rest, ":")
	return verb, id, owner
}

// chosen acknowledges a stored press: Telegram's spinner stops with what
// was chosen, and the question loses its buttons and says it instead.
func (a *Adapter) chosen(ctx context.Context, q *callbackQuery) {
	chose := "Approve"
	switch verb, _, _ := pressOf(q); verb {
	case dataDeny:
		chose = "Deny"
	case dataAlways:
		chose = "Always allow"
	case dataAnswer:
		chose = labelOf(q)
	}
	a.answerClick(ctx, q.ID, "You chose: "+chose, false)
	a.closeQuestion(ctx, q, "You chose: "+chose+".")
}

// labelOf is the text of the button pressed, as the message the press
// came with shows it.
func labelOf(q *callbackQuery) string {
	if q.Message != nil && q.Message.ReplyMarkup != nil {
		for _, row := range q.Message.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				if b.CallbackData != nil && *b.CallbackData == q.Data {
					return b.Text
				}
			}
		}
	}
	return "your answer"
}

// closeQuestion edits a question to end with note, without its buttons:
// what was chosen, or why the request is over.
func (a *Adapter) closeQuestion(ctx context.Context, q *callbackQuery, note string) {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(q.Message.Chat.ID, 10), "message_id": strconv.Itoa(q.Message.MessageID),
		"text": strings.TrimSpace(q.Message.Text) + "\n\n" + note}
	if _, err := a.call(ctx, "editMessageText", p); err != nil && ctx.Err() == nil {
		a.optionalFailed("editMessageText", err)
	}
}

// answerClick answers a button press, as Telegram asks every bot to, with
// an optional note (an alert when alert is set).
func (a *Adapter) answerClick(ctx context.Context, id, text string, alert bool) {
	p := tgbotapi.Params{"callback_query_id": id}
	p.AddNonEmpty("text", text)
	p.AddBool("show_alert", alert)
	if _, err := a.request(ctx, "answerCallbackQuery", p); err != nil && ctx.Err() == nil {
		a.optionalFailed("answerCallbackQuery", err)
	}
}
