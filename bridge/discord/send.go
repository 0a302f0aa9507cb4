package discord

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/bwmarrin/discordgo"

	"loadout/backoff"
	"loadout/bridge"
)

// Split cuts a Markdown answer into messages of at most MaxMessage
// characters, never leaving a code block open across two.
func (a *Adapter) Split(text string) []string { return bridge.Split(text, MaxMessage) }

// Send posts one part to the route (Discord renders the model's
// Markdown as it is).
func (a *Adapter) Send(ctx context.Context, rt any, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	_, err = a.post(ctx, r, part, nil, nonce(ctx, ""))
	return err
}

// noMentions keeps the bot's messages from pinging anyone: what the
// model writes never reaches @everyone.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// message is a message to post: discordgo's, with the nonce Discord
// checks so that a part posted again (after a lost answer, or a crash
// before its sending was recorded) is not posted twice.
type message struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce,omitempty"`
	EnforceNonce bool   `json:"enforce_nonce,omitempty"`
}

// nonce names the part of an answer being sent (bridge.PartKey), and
// which of its messages when it takes two (salt), in Discord's 25
// characters; "" for anything else (a notice).
func nonce(ctx context.Context, salt string) string {
	key, ok := bridge.PartKey(ctx)
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte(key + "\x00" + salt))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:25]
}

// post puts text in the route's conversation, with components (buttons)
// when given, and returns the message's id: a follow-up of the
// interaction the route answers, or a message in the channel (replying
// to the person's message in a server), with nonce when not "".
// Server errors are tried again; rate limits are waited out.
func (a *Adapter) post(ctx context.Context, r route, text string, components []discordgo.MessageComponent, nonce string) (string, error) {
	var id string
	err := a.retry(ctx, func(ctx context.Context) error {
		var m *discordgo.Message
		var err error
		if r.Token != "" {
			m, err = a.followUp(ctx, r, text, components)
			if !expired(err) || r.Guild != "" {
				if err == nil {
					id = m.ID
				}
				return err
			}
			// The interaction's 15 minutes are over; in a direct
			// message the answer can still go to the chat.
		}
		send := message{MessageSend: &discordgo.MessageSend{Content: text, Components: components, AllowedMentions: noMentions()}}
		if r.Reply != "" {
			send.Reference = &discordgo.MessageReference{MessageID: r.Reply, ChannelID: r.Channel, FailIfNotExists: new(bool)}
		}
		send.Nonce, send.EnforceNonce = nonce, nonce != ""
		endpoint := discordgo.EndpointChannelMessages(r.Channel)
		body, err := a.api.RequestWithBucketID(http.MethodPost, endpoint, send, endpoint, discordgo.WithContext(ctx))
		if err != nil {
			return err
		}
		m = &discordgo.Message{}
		if err := discordgo.Unmarshal(body, m); err != nil || m.ID == "" {
			return errors.New("discord: a posted message came back without its id")
		}
		id = m.ID
		return nil
	})
	return id, err
}

// followUp posts text as a follow-up of the route's interaction.
func (a *Adapter) followUp(ctx context.Context, r route, text string, components []discordgo.MessageComponent) (*discordgo.Message, error) {
	p := &discordgo.WebhookParams{Content: text, Components: components, AllowedMentions: noMentions()}
	if r.Ephemeral {
		p.Flags = discordgo.MessageFlagsEphemeral
	}
	return a.api.FollowupMessageCreate(r.interaction(), true, p, discordgo.WithContext(ctx))
}

// interaction is the interaction a route answers, as discordgo names it.
func (r route) interaction() *discordgo.Interaction {
	return &discordgo.Interaction{AppID: r.App, Token: r.Token}
}

// expired reports an interaction whose token no longer works.
func expired(err error) bool {
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response == nil {
		return false
	}
	return re.Response.StatusCode == http.StatusUnauthorized || re.Response.StatusCode == http.StatusNotFound
}

// retry tries fn while Discord answers with a server error or cannot be
// reached, up to four times; anything else is final.
func (a *Adapter) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	p := backoff.Policy{Attempts: 4, Initial: 500 * time.Millisecond, Max: 10 * time.Second, Sleep: a.cfg.sleep}
	return scrub(p.Do(ctx, func(err error) (bool, time.Duration) {
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil {
			return re.Response.StatusCode >= 500, 0
		}
		var rl *discordgo.RateLimitError
		if errors.As(err, &rl) {
			return true, rl.RetryAfter
		}
		return !errors.Is(err, discordgo.ErrJSONUnmarshal), 0
	}, fn))
}

// Working shows "typing…" in the route's channel until stop is called,
// renewed every TypingInterval (Discord shows it for ten seconds). A
// slash command's answer shows Discord's own "thinking…" instead.
func (a *Adapter) Working(ctx context.Context, rt any) (stop func()) {
	r, ok := rt.(route)
	if !ok || r.Token != "" {
		return func() {}
	}
	return bridge.Renew(ctx, a.cfg.TypingInterval, func(ctx context.Context) {
		if err := a.api.ChannelTyping(r.Channel, discordgo.WithContext(ctx)); err != nil && ctx.Err() == nil {
			a.log.Debug("discord: could not show typing", "err", err)
		}
	})
}

// Draft shows the answer so far: the first call posts it, later ones
// edit that message. Text beyond one message is left for the parts
// that follow.
func (a *Adapter) Draft(ctx context.Context, rt any, draft []byte, text string) ([]byte, error) {
	r, err := asRoute(rt)
	if err != nil {
		return nil, err
	}
	text = draftText(text)
	if draft == nil {
		id, err := a.post(ctx, r, text, nil, "")
		if err != nil {
			return nil, err
		}
		return []byte(id), nil
	}
	return draft, a.edit(ctx, r, string(draft), text)
}

// Replace edits the draft into part. When the draft is gone (deleted by
// the person), the part is posted anew.
func (a *Adapter) Replace(ctx context.Context, rt any, draft []byte, part string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	err = a.edit(ctx, r, string(draft), part)
	if gone(err) {
		_, err = a.post(ctx, r, part, nil, nonce(ctx, ""))
	}
	return err
}

// edit changes the text of message id, a follow-up of the route's
// interaction or a message in its channel.
func (a *Adapter) edit(ctx context.Context, r route, id, text string) error {
	return a.retry(ctx, func(ctx context.Context) error {
		if r.Token != "" {
			_, err := a.api.FollowupMessageEdit(r.interaction(), id, &discordgo.WebhookEdit{Content: &text}, discordgo.WithContext(ctx))
			return err
		}
		_, err := a.api.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: r.Channel, Content: &text, AllowedMentions: noMentions()},
			discordgo.WithContext(ctx))
		return err
	})
}

// gone reports an edit refused because the message no longer exists.
func gone(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusNotFound
}

// draftText fits the answer so far in one message, marked as
// unfinished.
func draftText(text string) string {
	const more = " …"
	if len([]rune(text))+len([]rune(more)) > MaxMessage {
		text = bridge.Split(text, MaxMessage-len([]rune(more)))[0]
	}
	return strings.TrimRightFunc(text, unicode.IsSpace) + more
}
