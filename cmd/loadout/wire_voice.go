package main

import (
	"context"
	"fmt"
	"time"

	"loadout/bridge"
	"loadout/chat"
	"loadout/chat/openai"
	"loadout/tools"
	"loadout/voice"
)

// wireVoice sets up voice notes when voice.transcription_model is set
// (or answers are spoken always): the service, over the llm section's
// server unless the voice section names its own, and the /status line of
// what voice cost the chat.
func (a *app) wireVoice() {
	vc := a.cfg.Voice
	if !vc.Enabled() && vc.Reply != voice.ReplyAlways {
		return
	}
	base := a.cfg.LLM.BaseURL
	if base == "" {
		base = openai.DefaultBaseURL
	}
	vc = vc.WithDefaults(base, a.cfg.LLM.APIKey)
	a.voice = voice.New(vc, voice.Options{Workspace: a.workspaces, Usage: a.db, Meter: a.metrics, HTTPClient: a.api,
		Logger: a.log.With("part", "voice")})
	a.router.AddStatus(func(ctx context.Context, in chat.Inbound) (string, error) {
		u, err := a.db.VoiceUsage(ctx, in.ChatKey)
		if err != nil {
			return "", err
		}
		notes := "notes"
		if u.Notes == 1 {
			notes = "note"
		}
		return fmt.Sprintf("Voice: %s %s heard (%s), %s characters spoken", tools.Thousands(u.Notes), notes,
			bridge.Age(time.Duration(u.Seconds)*time.Second), tools.Thousands(u.Chars)), nil
	})
}
