package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
)

// Split cuts a Markdown answer into the parts sent as separate messages.
func (a *Adapter) Split(text string) []string { return Chunks(text, MaxMessage) }

// Send sends one part to the route as Telegram HTML. A part whose
// formatting Telegram rejects is sent again as plain text.
func (a *Adapter) Send(ctx context.Context, route any, part string) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	return a.deliver(ctx, r, nil, part, "")
}

// deliver puts part in the chat as Telegram HTML, with markup (buttons)
// when given: as a new message, or by editing draft into it. Formatting
// Telegram rejects goes again as plain text, and a draft that is gone
// (deleted by the person) is replaced by a new message.
func (a *Adapter) deliver(ctx context.Context, r routeInfo, draft []byte, part, markup string) error {
	put := func(text, mode string) error {
		if draft != nil {
			return a.edit(ctx, r, draft, text, mode, markup)
		}
		_, err := a.post(ctx, r, text, mode, markup)
		return err
	}
	err := put(HTML(part), "HTML")
	if isParseError(err) {
		a.log.Warn("telegram: formatting rejected; sending the text plain", "err", err)
		err = put(part, "")
	}
	if draft != nil && isGone(err) {
		return a.deliver(ctx, r, nil, part, markup)
	}
	return err
}

// Working shows "typing…" in the route's chat until stop is called. stop
// waits for the renewal loop to end and may be called more than once.
// The first sign is sent before Working returns, so it always lands
// before the answer, however short the turn; a slow Bot API holds the
// turn back by at most bridge.FirstSignWait.
func (a *Adapter) Working(ctx context.Context, route any) (stop func()) {
	r, ok := route.(routeInfo)
	if !ok {
		return func() {}
	}
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10), "action": tgbotapi.ChatTyping}
	p.AddNonZero("message_thread_id", r.ThreadID)
	sign := func(ctx context.Context) {
		if _, err := a.request(ctx, "sendChatAction", p); err != nil && ctx.Err() == nil {
			a.optionalFailed("sendChatAction", err)
		}
	}
	return bridge.Renew(ctx, a.cfg.TypingInterval, sign)
}

// routeOf is where messages to the chat or topic chatKey names go.
func routeOf(chatKey string) (routeInfo, error) {
	rest, ok := strings.CutPrefix(chatKey, "telegram:")
	if !ok {
		return routeInfo{}, fmt.Errorf("telegram: %q is not a Telegram chat key", chatKey)
	}
	chatPart, threadPart, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseInt(chatPart, 10, 64)
	if err != nil {
		return routeInfo{}, fmt.Errorf("telegram: bad chat key %q", chatKey)
	}
	r := routeInfo{ChatID: id}
	if threadPart != "" {
		if r.ThreadID, err = strconv.Atoi(threadPart); err != nil {
			return routeInfo{}, fmt.Errorf("telegram: bad chat key %q", chatKey)
		}
	}
	return r, nil
}

// Route is where messages to the chat or forum topic chatKey names go
// ("telegram:42", "telegram:-100123:7").
func (a *Adapter) Route(chatKey string) ([]byte, error) {
	r, err := routeOf(chatKey)
	if err != nil {
		return nil, err
	}
	return r.encode(), nil
}

// Private reports whether chatKey is a private chat with one person:
// Telegram gives those positive ids, groups negative ones.
func (a *Adapter) Private(chatKey string) bool {
	r, err := routeOf(chatKey)
	return err == nil && r.ChatID > 0 && r.ThreadID == 0
}

// Chunks splits Markdown into pieces that fit one message: bridge.Split,
// with pieces cut again if they are too long in UTF-16 units, which is how
// Telegram counts.
func Chunks(md string, limit int) []string {
	return chunks(md, limit, limit)
}

// chunks splits md at size runes, and splits again, smaller, every piece
// longer than limit UTF-16 units.
func chunks(md string, limit, size int) []string {
	var out []string
	for _, c := range bridge.Split(md, size) {
		n := len(utf16.Encode([]rune(c)))
		if n <= limit || size <= 32 {
			out = append(out, c)
			continue
		}
		smaller := size * limit / n
		if smaller >= size {
			smaller = size - 1
		}
		out = append(out, chunks(c, limit, smaller)...)
	}
	return out
}

// post sends a message (with markup, when given) and returns its id.
func (a *Adapter) post(ctx context.Context, r routeInfo, text, parseMode, markup string) (int, error) {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10), "text": text}
	p.AddNonEmpty("parse_mode", parseMode)
	p.AddNonEmpty("reply_markup", markup)
	p.AddNonZero("message_thread_id", r.ThreadID)
	if r.ReplyTo != 0 {
		p.AddNonZero("reply_to_message_id", r.ReplyTo)
		p.AddBool("allow_sending_without_reply", true)
	}
	p.AddBool("disable_web_page_preview", true)
	resp, err := a.call(ctx, "sendMessage", p)
	if err != nil {
		return 0, err
	}
	var m struct {
		ID int `json:"message_id"`
	}
	if err := json.Unmarshal(resp.Result, &m); err != nil || m.ID == 0 {
		return 0, fmt.Errorf("telegram: sendMessage answered without a message id: %s", resp.Result)
	}
	return m.ID, nil
}

// Draft shows the answer so far as plain text (its Markdown may be cut
// half-way): the first call posts it, later ones edit that message. Text
// beyond one message is left for the parts that follow.
func (a *Adapter) Draft(ctx context.Context, route any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(route)
	if err != nil {
		return nil, err
	}
	text = draftText(text)
	if draft == nil {
		id, err := a.post(ctx, r, text, "", "")
		if err != nil {
			return nil, err
		}
		return []byte(strconv.Itoa(id)), nil
	}
	return draft, a.edit(ctx, r, draft, text, "", "")
}

// Replace edits the draft into part, formatted as Send formats it. When
// the draft is gone (deleted by the person), the part is sent anew.
func (a *Adapter) Replace(ctx context.Context, route any, draft []byte, part string) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	return a.deliver(ctx, r, draft, part, "")
}

// edit changes the text (and markup, when given) of message draft; an
// edit that changes nothing is not an error.
func (a *Adapter) edit(ctx context.Context, r routeInfo, draft []byte, text, parseMode, markup string) error {
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10), "message_id": string(draft), "text": text}
	p.AddNonEmpty("parse_mode", parseMode)
	p.AddNonEmpty("reply_markup", markup)
	p.AddBool("disable_web_page_preview", true)
	_, err := a.call(ctx, "editMessageText", p)
	var te *tgbotapi.Error
	if errors.As(err, &te) && strings.Contains(te.Message, "message is not modified") {
		return nil
	}
	return err
}

// isGone reports an edit refused because the message no longer exists.
func isGone(err error) bool {
	var te *tgbotapi.Error
	return errors.As(err, &te) && te.Code == http.StatusBadRequest &&
		(strings.Contains(te.Message, "message to edit not found") || strings.Contains(te.Message, "MESSAGE_ID_INVALID"))
}

// draftText fits the answer so far in one message, marked as unfinished.
// Only the text's start is looked at, so a long answer costs no more.
func draftText(text string) string {
	const more = " …"
	if len(text) > 4*MaxMessage {
		cut := 4 * MaxMessage
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	if len(utf16.Encode([]rune(text)))+len(more) > MaxMessage {
		text = Chunks(text, MaxMessage-len(more))[0]
	}
	return strings.TrimRightFunc(text, unicode.IsSpace) + more
}

func isParseError(err error) bool {
	var te *tgbotapi.Error
	return errors.As(err, &te) && te.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(te.Message), "can't parse entities")
}
