package slack

import (
	"context"
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

// slash runs a registered slash command such as "/loadout clear". The
// answer is visible only to the person who typed it. The request has
// already been acknowledged; the command runs on the pool.
func (a *Adapter) slash(cmd slackapi.SlashCommand) {
	key := "slack:" + cmd.TeamID + ":" + cmd.ChannelID
	respond := func(text string) {
		a.submit(key, func(ctx context.Context) { a.respond(ctx, cmd, text) })
	}
	if !a.allowed(cmd.UserID) {
		if a.allow.FirstRefusal(cmd.UserID) {
			respond(bridge.TextRefused)
		}
		return
	}
	text := strings.TrimSpace(cmd.Text)
	if text == "" {
		text = "help"
	}
	text = "/" + strings.TrimPrefix(text, "/")
	name, _, ok := bridge.ParseCommand(text)
	switch {
	case !ok:
		respond(textSlashUsage)
		return
	case !strings.HasPrefix(cmd.ChannelID, "D") && (name == "clear" || name == "status"):
		respond(textSlashThread)
		return
	}
	in := chat.Inbound{ChatKey: key, UserKey: "slack:" + cmd.TeamID + ":" + cmd.UserID, Text: text}
	a.submit(key, func(ctx context.Context) {
		reply, err := a.router.Handle(ctx, in)
		if err != nil {
			a.log.Error("slack command failed", "chat", key, "err", err)
			reply = bridge.TextFailed
		}
		a.respond(ctx, cmd, reply)
	})
}

// respond answers a slash command through its response URL, or as an
// ephemeral message when there is none.
func (a *Adapter) respond(ctx context.Context, cmd slackapi.SlashCommand, text string) {
	for _, chunk := range bridge.Split(text, a.cfg.ChunkSize) {
		body := Mrkdwn(chunk)
		var err error
		if cmd.ResponseURL != "" {
			err = a.retry(ctx, "response_url", func(ctx context.Context) error {
				return slackapi.PostWebhookCustomHTTPContext(ctx, cmd.ResponseURL, a.cfg.HTTPClient,
					&slackapi.WebhookMessage{Text: body, ResponseType: slackapi.ResponseTypeEphemeral})
			})
		} else {
			err = a.retry(ctx, "chat.postEphemeral", func(ctx context.Context) error {
				_, err := a.api.PostEphemeralContext(ctx, cmd.ChannelID, cmd.UserID, slackapi.MsgOptionText(body, false))
				return err
			})
		}
		if err != nil {
			a.log.Error("slack command answer not sent", "err", err)
			return
		}
	}
}
