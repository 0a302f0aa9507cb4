package slack

import (
	"context"
	"fmt"
	"log/slog"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// runSocket receives events over Socket Mode until ctx is cancelled.
// slack-go reconnects by itself when Slack asks it to or the connection
// drops; it gives up only when the app token is rejected.
func (a *Adapter) runSocket(ctx context.Context) error {
	sm := socketmode.New(a.api, socketmode.OptionLog(slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)))
	runErr := make(chan error, 1)
	go func() { runErr <- sm.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-runErr
			return nil
		case err := <-runErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode (check slack.app_token): %w", err)
		case evt := <-sm.Events:
			a.socketEvent(ctx, sm, evt)
		}
	}
}

// socketEvent handles one Socket Mode event. An envelope is acknowledged
// once its event is stored; one that could not be stored is left
// unacknowledged, so Slack delivers it again.
func (a *Adapter) socketEvent(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		a.log.Debug("slack socket mode connecting")
	case socketmode.EventTypeConnected:
		a.log.Info("slack socket mode connected")
	case socketmode.EventTypeConnectionError:
		a.log.Warn("slack socket mode connection failed; retrying", "err", errOf(evt.Data))
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack socket mode: slack.app_token was not accepted")
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("slack socket mode problem", "type", string(evt.Type))
	case socketmode.EventTypeEventsAPI:
		if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok && ev.Type == slackevents.CallbackEvent {
			if err := a.callback(ctx, ev); err != nil {
				a.log.Error("slack event not stored; leaving it for Slack to deliver again", "err", err)
				return
			}
		}
		a.ack(ctx, sm, evt)
	case socketmode.EventTypeSlashCommand:
		if cmd, ok := evt.Data.(slackapi.SlashCommand); ok {
			envelope := ""
			if evt.Request != nil {
				envelope = evt.Request.EnvelopeID
			}
			id := "command:" + cmd.TriggerID
			if cmd.TriggerID == "" {
				id = "envelope:" + envelope
			}
			if err := a.slash(ctx, cmd, id); err != nil {
				a.log.Error("slack command not stored; leaving it for Slack to deliver again", "err", err)
				return
			}
		}
		a.ack(ctx, sm, evt)
	case socketmode.EventTypeInteractive:
		if cb, ok := evt.Data.(slackapi.InteractionCallback); ok {
			if err := a.interaction(ctx, cb); err != nil {
				a.log.Error("slack button press not stored; leaving it for Slack to deliver again", "err", err)
				return
			}
		}
		a.ack(ctx, sm, evt)
	}
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) {
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		return
	}
	if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("slack envelope not acknowledged", "err", err)
	}
}

func errOf(data any) error {
	if e, ok := data.(*slackapi.ConnectionErrorEvent); ok {
		return e.ErrorObj
	}
	return nil
}
