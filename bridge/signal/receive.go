package signal

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"loadout/backoff"
	"loadout/bridge"
	"loadout/chat"
)

// received is one item of what signal-cli's receive method returns.
type received struct {
	Envelope *envelope `json:"envelope"`
}

// envelope is the part of a signal-cli envelope the channel reads. Only a
// data message is something a person wrote; receipts, typing, sync,
// call, story and edit envelopes are not.
type envelope struct {
	SourceNumber string       `json:"sourceNumber"`
	SourceUUID   string       `json:"sourceUuid"`
	SourceName   string       `json:"sourceName"`
	Timestamp    int64        `json:"timestamp"`
	Data         *dataMessage `json:"dataMessage"`
}

type dataMessage struct {
	Timestamp   int64        `json:"timestamp"`
	Message     *string      `json:"message"`
	Reaction    *reaction    `json:"reaction"`
	Quote       *quote       `json:"quote"`
	Mentions    []mention    `json:"mentions"`
	Attachments []attachment `json:"attachments"`
	Group       *groupInfo   `json:"groupInfo"`
}

type reaction struct {
	Emoji               string `json:"emoji"`
	TargetAuthorNumber  string `json:"targetAuthorNumber"`
	TargetAuthorUUID    string `json:"targetAuthorUuid"`
	TargetSentTimestamp int64  `json:"targetSentTimestamp"`
	IsRemove            bool   `json:"isRemove"`
}

type quote struct {
	ID           int64  `json:"id"`
	AuthorNumber string `json:"authorNumber"`
	AuthorUUID   string `json:"authorUuid"`
}

type mention struct {
	Number string `json:"number"`
	UUID   string `json:"uuid"`
	Start  int    `json:"start"`
	Length int    `json:"length"`
}

type attachment struct {
	ContentType string `json:"contentType"`
	Filename    string `json:"filename"`
	ID          string `json:"id"`
	Size        int64  `json:"size"`
	VoiceNote   bool   `json:"voiceNote"`
}

type groupInfo struct {
	GroupID string `json:"groupId"`
}

// receive takes messages from signal-cli one at a time until ctx ends.
// Each call's messages are in the inbox before the next call; a call
// under way when ctx ends is let finish (signal-cli would finish it
// anyway, and hand what it took to nobody), and what it brought is
// stored.
func (a *Adapter) receive(ctx context.Context) {
	b := backoff.Policy{Initial: time.Second, Max: 30 * time.Second, Sleep: a.cfg.sleep}.New()
	for ctx.Err() == nil {
		call, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.PollTimeout+30*time.Second)
		var got []received
		params := map[string]any{"timeout": a.cfg.PollTimeout.Seconds(), "maxMessages": 1}
		err := a.rpc.call(call, "receive", params, &got)
		if err == nil {
			for _, r := range got {
				a.keep(call, r.Envelope)
			}
			cancel()
			b.Reset()
			continue
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		wait := b.Next()
		if alreadyReceiving(err) {
			a.log.Warn("signal: signal-cli is receiving already: a receive call of a stopped process is still under way, or the daemon was not started with --receive-mode=manual (it must be)", "wait", wait)
		} else {
			a.log.Warn("signal: receiving from signal-cli failed, retrying", "err", err, "wait", wait)
		}
		if b.Wait(ctx, wait) != nil {
			return
		}
	}
}

// keep hands one envelope to the pipeline, trying again while the store
// fails: signal-cli has let go of it.
func (a *Adapter) keep(ctx context.Context, e *envelope) {
	p := backoff.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Sleep: a.cfg.sleep}
	err := p.Do(ctx, backoff.Always, func(ctx context.Context) error {
		err := a.envelope(ctx, e)
		if err != nil && ctx.Err() == nil {
			a.log.Error("signal: cannot store a message, retrying", "err", err)
		}
		return err
	})
	if err != nil {
		a.log.Error("signal: a message could not be stored and is lost", "from", senderOf(e), "err", err)
	}
}

// sender is who wrote an envelope: their account id (lower case) and
// number (E.164), either of which may be missing, and the id their chat
// and user keys use (the account id, else the number).
type sender struct{ uuid, number, id string }

func senderOf(e *envelope) sender {
	if e == nil {
		return sender{}
	}
	s := sender{uuid: strings.ToLower(strings.TrimSpace(e.SourceUUID)), number: E164(e.SourceNumber)}
	s.id = s.uuid
	if s.id == "" {
		s.id = s.number
	}
	return s
}

// messageRef names an envelope for the inbox: its author and timestamp,
// which Signal keeps unique per author.
func messageRef(s sender, ts int64) string { return "msg:" + s.id + ":" + strconv.FormatInt(ts, 10) }

// where is an envelope's chat: its key and route.
func (a *Adapter) where(e *envelope, s sender) (string, route) {
	if g := e.Data.Group; g != nil && g.GroupID != "" {
		return groupPrefix + g.GroupID, route{Group: g.GroupID, QuoteTS: e.Timestamp, QuoteAuthor: s.id}
	}
	return personKey(s.id), route{To: s.id}
}

// envelope takes one envelope: what is not a person's message is
// dropped; a stranger is refused (once) without anything being stored;
// an allowed person's message is stored. An error means it was not
// stored.
func (a *Adapter) envelope(ctx context.Context, e *envelope) error {
	if e == nil || e.Data == nil {
		return nil // a receipt, typing, a sync or call message: nothing a person asked
	}
	s := senderOf(e)
	if s.id == "" || (s.number != "" && s.number == a.account) || e.Timestamp <= 0 {
		return nil
	}
	d := e.Data
	text := ""
	if d.Message != nil {
		text = *d.Message
	}
	key, r := a.where(e, s)
	if d.Reaction == nil && d.Group != nil {
		var ok bool
		if text, ok = a.addressed(d, text); !ok {
			return nil
		}
	}
	if d.Reaction == nil && strings.TrimSpace(text) == "" && len(d.Attachments) == 0 {
		return nil // a sticker, a deletion, a timer change
	}
	if !a.allow.Allowed(s.uuid, s.number) {
		if d.Reaction == nil {
			a.refuse(ctx, e, s, r)
		}
		return nil
	}
	// Once the message is stored (signal-cli keeps no copy of it), the
	// number they were let in by is kept for the web side.
	defer func() {
		if _, err := a.allow.Let(ctx, s.uuid, s.number); err != nil {
			a.log.Warn("signal: cannot keep the number a person was let in by; their web pages may refuse them until they write again", "uuid", s.uuid, "err", err)
		}
	}()
	id := messageRef(s, e.Timestamp)
	if d.Reaction != nil {
		return a.reacted(ctx, id, s, key, r, d.Reaction)
	}
	fallback := func() bridge.Pending {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: routes.Encode(r)}
	}
	_, err := a.pipe.Receive(ctx, id, fallback, func() (bridge.Pending, bool) { return a.judge(ctx, id, s, key, r, text, d) })
	return err
}

// refuse tells a stranger, once, that they are not let in, straight
// through signal-cli: nothing of theirs is stored. The log says how to
// let them in.
func (a *Adapter) refuse(ctx context.Context, e *envelope, s sender, r route) {
	a.log.Warn("signal: refused a message from someone who is not allowed; to allow them, add their number to signal.allowed_numbers (or their uuid to signal.allowed_uuids)",
		"number", s.number, "uuid", s.uuid, "name", e.SourceName)
	if !a.allow.FirstRefusal(s.id) {
		return
	}
	if err := a.rpc.call(ctx, "send", r.target(map[string]any{"message": bridge.TextRefused}), nil); err != nil {
		a.log.Warn("signal: could not send the refusal", "err", err)
	}
}

// judge turns an allowed person's message into what the pipeline
// takes: its text, its files kept, its voice note.
func (a *Adapter) judge(ctx context.Context, id string, s sender, key string, r route, text string, d *dataMessage) (bridge.Pending, bool) {
	p := bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: personKey(s.id)}, Route: routes.Encode(r)}
	if len(d.Attachments) > 0 {
		// A message signal-cli hands over again (after a crash of its
		// own) is dropped by the inbox; its files are not fetched again.
		if seen, err := a.pipe.Seen(ctx, id); err == nil && seen {
			return bridge.Pending{}, false
		}
	}
	var notes []string
	for _, at := range d.Attachments {
		if at.ID == "" {
			continue
		}
		if p.Voice == nil && (at.VoiceNote || strings.HasPrefix(at.ContentType, "audio/")) {
			note, reply, ok := a.takeVoice(ctx, key, r, at)
			switch {
			case !ok:
				continue
			case reply != "":
				p.Reply = reply
				return p, true
			}
			p.Voice = note
			continue
		}
		note, image := a.keepFile(ctx, key, r, at)
		notes = append(notes, note)
		if image != "" {
			p.Inbound.Images = append(p.Inbound.Images, image)
		}
	}
	text = strings.TrimSpace(strings.Join(append(notes, text), "\n"))
	if text == "" && p.Voice == nil {
		return bridge.Pending{}, false
	}
	p.Inbound.Text = text
	return p, true
}

// addressed reports whether a group message is for the bot: it mentions
// the bot or quotes one of its messages. It returns the text with the
// bot's mentions taken out and others' written as @number. Mention
// offsets and lengths come from the sender and are checked against the
// text (in UTF-16 units, as Signal counts) before any is used.
func (a *Adapter) addressed(d *dataMessage, text string) (string, bool) {
	quoted := d.Quote != nil && E164(d.Quote.AuthorNumber) == a.account && a.account != ""
	units := utf16.Encode([]rune(text))
	var out []uint16
	last, mentioned := 0, false
	for _, m := range d.Mentions {
		if m.Start < last || m.Length <= 0 || m.Length > len(units)-m.Start {
			continue // overlapping, empty, negative or past the end
		}
		out = append(out, units[last:m.Start]...)
		last = m.Start + m.Length
		if a.account != "" && E164(m.Number) == a.account {
			mentioned = true
			continue
		}
		who := m.Number
		if who == "" {
			who = m.UUID
		}
		out = append(out, utf16.Encode([]rune("@"+who))...)
	}
	if !mentioned && !quoted {
		return "", false
	}
	out = append(out, units[last:]...)
	return strings.TrimSpace(string(utf16.Decode(out))), true
}
