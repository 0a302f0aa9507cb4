package slack

import (
	"context"
	"strings"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"loadout/bridge"
	"loadout/chat"
)

// callback hands one Events API callback, from either transport, to the
// pipeline. It returns quickly: the turn runs on the pipeline. An error
// means the event was not stored and must not be acknowledged.
func (a *Adapter) callback(ctx context.Context, ev slackevents.EventsAPIEvent) error {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if !ok || cb.EventID == "" {
		return nil
	}
	if !a.identified() {
		return errNotReady
	}
	id := "event:" + cb.EventID
	if sharesFiles(ev.InnerEvent.Data) {
		// A redelivered event is dropped by the inbox; its files are not
		// downloaded a second time first.
		if seen, err := a.pipe.Seen(ctx, id); err == nil && seen {
			return nil
		}
	}
	_, err := a.pipe.Receive(ctx, id, nil, func() (bridge.Pending, bool) {
		return a.toPending(ctx, ev.TeamID, ev.InnerEvent.Data)
	})
	return err
}

// toPending filters an inner event: direct messages from people, and
// mentions in allowed channels. Everything else is dropped; a stranger
// gets one refusal. team is the workspace the event was delivered for,
// which holds the conversation; the person's own workspace is the
// event's user_team when they are a guest in a channel shared between
// workspaces, and team otherwise.
func (a *Adapter) toPending(ctx context.Context, team string, inner any) (bridge.Pending, bool) {
	self := a.botUser()
	var user, userTeam, text, chatKey string
	var r route
	var shared []slackapi.File
	switch e := inner.(type) {
	case *slackevents.MessageEvent:
		if e.ChannelType != "im" || (e.SubType != "" && e.SubType != "file_share") || e.BotID != "" || e.User == "" || e.User == self {
			return bridge.Pending{}, false
		}
		user, userTeam, text = e.User, e.UserTeam, e.Text
		if e.Message != nil {
			shared = e.Message.Files
		}
		r = route{Channel: e.Channel, Thread: e.ThreadTimeStamp, TS: e.TimeStamp}
		chatKey = "slack:" + team + ":" + e.Channel
	case *slackevents.AppMentionEvent:
		if strings.HasPrefix(e.Channel, "D") || e.BotID != "" || e.User == "" || e.User == self {
			return bridge.Pending{}, false
		}
		if len(a.channels) > 0 && !a.channels[e.Channel] {
			a.log.Debug("slack mention in a channel not in slack.allowed_channels; ignored", "slack_channel", e.Channel)
			return bridge.Pending{}, false
		}
		thread := e.ThreadTimeStamp
		if thread == "" {
			thread = e.TimeStamp // a mention at the top level starts a thread
		}
		user, userTeam, text = e.User, e.UserTeam, e.Text
		shared = e.Files
		r = route{Channel: e.Channel, Thread: thread, TS: e.TimeStamp}
		chatKey = "slack:" + team + ":" + e.Channel + ":" + thread
	default:
		return bridge.Pending{}, false
	}
	if userTeam == "" {
		userTeam = team
	}
	if !a.allowed(userTeam, user) {
		if !a.allow.FirstRefusal(userTeam + ":" + user) {
			return bridge.Pending{}, false
		}
		r.TS = ""
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey}, Route: r.encode(), Reply: bridge.TextRefused}, true
	}
	text = a.commandWord(PlainText(text, self))
	var notes, images []string
	var voice *bridge.VoiceNote
	for _, f := range shared {
		if voice == nil && isAudio(f) {
			// The first recording is the message; it is heard.
			note, reply, ok := a.takeVoice(ctx, chatKey, f)
			if !ok || reply != "" {
				r.TS = ""
				return bridge.Pending{Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "slack:" + userTeam + ":" + user}, Route: r.encode(), Reply: reply}, ok
			}
			voice = note
			continue
		}
		note, image := a.keepFile(ctx, chatKey, f)
		notes = append(notes, note)
		if image != "" {
			images = append(images, image)
		}
	}
	if len(notes) > 0 {
		text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + text)
	}
	if text == "" && voice == nil {
		return bridge.Pending{}, false
	}
	return bridge.Pending{
		Inbound: chat.Inbound{ChatKey: chatKey, UserKey: "slack:" + userTeam + ":" + user, Text: text, Images: images},
		Route:   r.encode(),
		Voice:   voice,
	}, true
}

// allowed reports whether user of team may talk to the bot, and logs a
// refusal. An entry "TEAM:USER" allows that user of that workspace; a
// bare user id allows the user only in the app's own workspace, so a
// shared channel's guest with a colliding id is not let in.
func (a *Adapter) allowed(team, user string) bool {
	a.mu.Lock()
	own := a.teamID
	a.mu.Unlock()
	if a.allow.Allowed(team+":"+user, "") || (team != "" && team == own && a.allow.Allowed(user, "")) {
		return true
	}
	a.log.Warn("slack user refused: add TEAM:USER (or the bare user id, for your own workspace) to slack.allowed_users to allow them",
		"team_id", team, "user_id", user)
	return false
}

// Admits reports whether slack.allowed_users lets in the person with
// this key ("slack:TEAM:USER") now, as allowed judges a message of
// theirs (bridge.Admitter). A bare user id needs the app's own
// workspace, known once it has reached Slack: before, it cannot tell.
func (a *Adapter) Admits(_ context.Context, userKey string) (bool, error) {
	team, user, ok := strings.Cut(strings.TrimPrefix(userKey, "slack:"), ":")
	if !ok || !strings.HasPrefix(userKey, "slack:") || team == "" || user == "" {
		return false, nil
	}
	if a.allow.Allowed(team+":"+user, "") {
		return true, nil
	}
	if !a.allow.Allowed(user, "") {
		return false, nil
	}
	a.mu.Lock()
	own := a.teamID
	a.mu.Unlock()
	if own == "" {
		return false, errNotReady
	}
	return team == own, nil
}

var _ bridge.Admitter = (*Adapter)(nil)

// commandWord lets a message that is only a command's name ("clear"), or
// a command with its one argument ("connect google"), run the command:
// Slack's composer takes a leading slash for its own commands.
func (a *Adapter) commandWord(text string) string {
	words := strings.Fields(strings.ToLower(text))
	if len(words) == 0 || len(words) > 2 {
		return text
	}
	for _, c := range a.router.Commands() {
		if c.Name != words[0] {
			continue
		}
		// "clear", or a command with its one argument: "connect google".
		if len(words) == 1 || strings.EqualFold(c.Args, words[1]) {
			return "/" + strings.Join(words, " ")
		}
	}
	return text
}
