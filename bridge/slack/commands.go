package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	slackapi "github.com/slack-go/slack"

	"loadout/bridge"
	"loadout/chat"
)

// Sentences for slash commands that cannot run where they were typed.
const (
	textSlashUsage  = "Send me a direct message or mention me in a channel to talk to me. `/loadout help` lists the commands."
	textSlashThread = "In channels every conversation is a thread: mention me at the top level to start a new one, or mention me in a thread with /clear or /status. In our direct messages this command works as it is."
)

// commandID names a slash command over HTTP for the inbox: its trigger,
// which is unique per invocation, or else the signed body itself, so a
// replayed request is recognised.
func commandID(cmd slackapi.SlashCommand, body []byte) string {
	if cmd.TriggerID != "" {
		return "command:" + cmd.TriggerID
	}
	sum := sha256.Sum256(body)
	return "command:body:" + hex.EncodeToString(sum[:12])
}

// slash hands a slash command such as "/loadout clear" to the pipeline.
// The answer is visible only to the person who typed it. An error means
// the command was not stored.
func (a *Adapter) slash(ctx context.Context, cmd slackapi.SlashCommand, id string) error {
	if !a.identified() {
		return errNotReady
	}
	_, err := a.pipe.Receive(ctx, id, nil, func() (bridge.Pending, bool) {
		return a.slashPending(cmd)
	})
	return err
}

func (a *Adapter) slashPending(cmd slackapi.SlashCommand) (bridge.Pending, bool) {
	key := "slack:" + cmd.TeamID + ":" + cmd.ChannelID
	r := route{Channel: cmd.ChannelID, Ephemeral: true, ResponseURL: cmd.ResponseURL, User: cmd.UserID}
	answer := func(text string) (bridge.Pending, bool) {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: text}, true
	}
	if !a.allowed(cmd.TeamID, cmd.UserID) {
		if a.allow.FirstRefusal(cmd.TeamID + ":" + cmd.UserID) {
			return answer(bridge.TextRefused)
		}
		return bridge.Pending{}, false
	}
	text := strings.TrimSpace(cmd.Text)
	if text == "" {
		text = "help"
	}
	text = "/" + strings.TrimPrefix(text, "/")
	name, _, ok := bridge.ParseCommand(text)
	switch {
	case !ok:
		return answer(textSlashUsage)
	case !strings.HasPrefix(cmd.ChannelID, "D") && (name == "clear" || name == "status"):
		return answer(textSlashThread)
	}
	return bridge.Pending{
		Inbound: chat.Inbound{ChatKey: key, UserKey: "slack:" + cmd.TeamID + ":" + cmd.UserID, Text: text},
		Route:   r.encode(),
	}, true
}
