package main

import (
	"cmp"

	"loadout/chat/openai"
	"loadout/voice"
)

// wireVoice sets up voice notes (voice.Setup): the service, over the llm
// section's server unless the voice section names its own.
func (a *app) wireVoice() {
	a.voice = voice.Setup(a.cfg.Voice, cmp.Or(a.cfg.LLM.BaseURL, openai.DefaultBaseURL), a.cfg.LLM.APIKey,
		voice.Options{Workspace: a.workspaces, Meter: a.metrics, HTTPClient: a.api, Logger: a.log.With("part", "voice")}, a.db, a.router)
}
