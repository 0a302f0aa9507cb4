package mattermost

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// Approval buttons. A question is posted with a message attachment
// whose buttons' integration URL is mattermost.actions_url; Mattermost
// posts a press there with the button's context and the presser's user
// id. Mattermost does not sign these requests, and anyone who reaches
// the endpoint can post one, so each context carries an HMAC, under a
// key derived from the bot's token, of everything it says (the verb,
// the question, the person asked, the chat): a request whose context
// was not made by this channel is refused before anything is read from
// it. The context never reaches Mattermost's clients.

// Verbs of the buttons, which are also their action ids (Mattermost
// takes letters and digits there).
const (
	verbApprove = "approve"
	verbDeny    = "deny"
	verbAlways  = "always"
)

// maxAction caps an action request's body.
const maxAction = 64 << 10

// signingKey derives the buttons' key from the bot's token: every
// process sharing the token checks every other's buttons, and a new
// token voids the old buttons (/approve still answers them).
func signingKey(token string) []byte {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("loadout mattermost approval buttons"))
	return mac.Sum(nil)
}

// press is a button's context.
type press struct {
	Verb     string `json:"verb"`
	Question string `json:"question"`
	// Owner is the user id of the person asked.
	Owner string `json:"owner"`
	// Chat is the question's chat, Root its thread.
	Chat string `json:"chat"`
	Root string `json:"root,omitempty"`
	Sig  string `json:"sig"`
}

// signature is the HMAC of what the context says.
func (a *Adapter) signature(p press) []byte {
	mac := hmac.New(sha256.New, a.key)
	for _, s := range []string{p.Verb, p.Question, p.Owner, p.Chat, p.Root} {
		mac.Write([]byte(s))
		mac.Write([]byte{0})
	}
	return mac.Sum(nil)
}

func (a *Adapter) signed(p press) press {
	p.Sig = base64.RawURLEncoding.EncodeToString(a.signature(p))
	return p
}

// genuine reports whether p was made by this channel.
func (a *Adapter) genuine(p press) bool {
	got, err := base64.RawURLEncoding.DecodeString(p.Sig)
	return err == nil && hmac.Equal(got, a.signature(p))
}

// Ask posts a question that waits for the person's approval, as a post
// of its own, with Approve and Deny buttons labelled with its code, and
// Always allow where it is offered. A part too long to take the
// request's line goes first, alone. Without mattermost.actions_url the
// question ends with the commands that answer it instead.
func (a *Adapter) Ask(ctx context.Context, rt any, part string, q bridge.Question, user string) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if a.cfg.ActionsURL == "" {
		return a.Send(ctx, r, part+bridge.AskHint(q))
	}
	text, salt := part+bridge.AskLine(q), ""
	if len([]rune(text)) > a.cfg.MaxMessage {
		if err := a.Send(ctx, r, part); err != nil {
			return err
		}
		text, salt = strings.TrimSpace(bridge.AskLine(q)), "ask"
	}
	code := chat.CodeOf(q.ID)
	base := press{Question: q.ID, Owner: strings.TrimPrefix(user, "mattermost:"), Chat: r.chat(), Root: r.Root}
	button := func(verb, label, style string) map[string]any {
		p := base
		p.Verb = verb
		return map[string]any{"id": verb, "type": "button", "name": label + " " + code, "style": style,
			"integration": map[string]any{"url": a.cfg.ActionsURL, "context": a.signed(p)}}
	}
	actions := []map[string]any{button(verbApprove, "Approve", "good"), button(verbDeny, "Deny", "danger")}
	if q.Always != "" {
		actions = append(actions, button(verbAlways, "Always allow", "default"))
	}
	props := map[string]any{"attachments": []map[string]any{{"actions": actions}}}
	_, err = a.post(ctx, newPost{ChannelID: r.Channel, RootID: r.Root, Message: text, Props: props, PendingID: a.pendingID(ctx, salt)})
	return err
}

// Mount serves the buttons' endpoint at mattermost.actions_url's path
// on the process's HTTP server, when it is set. A path another endpoint
// holds already is logged, and the endpoint not served.
func (a *Adapter) Mount(mux *http.ServeMux) {
	if a.cfg.ActionsURL == "" {
		return
	}
	path := actionsPath(a.cfg.ActionsURL)
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("mattermost: the path of mattermost.actions_url is taken by another endpoint, so the buttons are not served; choose another path",
				"path", path, "err", fmt.Sprint(r))
		}
	}()
	mux.HandleFunc("POST "+path, a.action)
}

// actionRequest is what Mattermost posts for a press.
type actionRequest struct {
	UserID    string `json:"user_id"`
	PostID    string `json:"post_id"`
	ChannelID string `json:"channel_id"`
	Context   press  `json:"context"`
}

// actionAnswer is the integration's answer: a text only the presser
// sees.
type actionAnswer struct {
	Ephemeral string `json:"ephemeral_text,omitempty"`
}

// action takes a press of Approve, Deny or Always allow. A request whose
// context this channel did not sign, or for a chat of another channel,
// is refused (403) and stores nothing. A press by anyone but the person
// asked is answered to them alone and decides nothing; a press that
// cannot count (answered, expired) is told to the presser. The press of
// the person asked becomes their /approve, /deny or /always in the
// chat, and the question's buttons give way to what they chose.
func (a *Adapter) action(w http.ResponseWriter, r *http.Request) {
	var req actionRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAction))
	if err != nil || json.Unmarshal(body, &req) != nil {
		http.Error(w, "not an action request", http.StatusBadRequest)
		return
	}
	p := req.Context
	rt, rerr := routeOf(p.Chat)
	if !a.genuine(p) || rerr != nil || rt.Channel != req.ChannelID || !isID(req.UserID) {
		a.log.Warn("mattermost: refused a button press whose context this channel did not sign", "remote", r.RemoteAddr, "user_id", req.UserID)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	answer := func(text string) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(actionAnswer{Ephemeral: text})
	}
	ctx := r.Context()
	if req.UserID != p.Owner || !a.allowed(ctx, req.UserID) {
		a.log.Warn("mattermost: refused a button press by someone other than the person asked", "user_id", req.UserID, "channel_id", req.ChannelID)
		answer(bridge.TextNotYours)
		return
	}
	userKey := "mattermost:" + req.UserID
	can, err := a.router.Answerable(ctx, p.Chat, userKey, p.Question)
	switch {
	case err != nil:
		a.log.Error("mattermost: could not check a button press", "channel_id", req.ChannelID, "err", err)
		answer("Sorry, I could not check that request just now. Please press again in a moment.")
		return
	case !can.OK:
		if can.Ended {
			a.closeQuestion(ctx, req.PostID, can.Why)
		}
		answer(can.Why)
		return
	}
	command, chose := "/approve ", "Approve"
	switch p.Verb {
	case verbDeny:
		command, chose = "/deny ", "Deny"
	case verbAlways:
		command, chose = "/always ", "Always allow"
	}
	rt.Root = p.Root
	_, err = a.pipe.Receive(ctx, "press:"+req.PostID+":"+p.Verb, nil, func() (bridge.Pending, bool) {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: p.Chat, UserKey: userKey, Text: command + p.Question}, Route: rt.encode()}, true
	})
	if err != nil {
		if !errors.Is(err, bridge.ErrStopped) {
			a.log.Error("mattermost: a button press could not be stored", "post_id", req.PostID, "err", err)
		}
		answer(bridge.TextNotSaved)
		return
	}
	a.closeQuestion(ctx, req.PostID, "You chose: "+chose+".")
	answer("")
}

// closeQuestion replaces the question's buttons with note.
func (a *Adapter) closeQuestion(ctx context.Context, postID, note string) {
	props := map[string]any{"attachments": []map[string]any{{"text": note}}}
	if err := a.edit(ctx, postID, "", props); err != nil {
		a.log.Warn("mattermost: could not take the buttons off a question", "post_id", postID, "err", err)
	}
}
