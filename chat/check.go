package chat

import "loadout/config"

// Check checks the engine's keys of the llm section.
func (c Config) Check(ch *config.Checker) {
	ch.AtLeast("max_tool_rounds", c.MaxToolRounds, 1)
	ch.AtLeast("max_tool_calls", c.MaxToolCalls, 1)
	ch.AtLeast("history_tokens", c.HistoryTokens, 1000)
	ch.AtLeast("history_messages", c.HistoryMessages, 10)
	ch.AtLeast("tool_result_chars", c.ToolResultChars, 100)
	ch.AtLeast("tool_result_max_chars", c.ToolResultMaxChars, 1000)
	if ch.Set[ch.Key("cached_sessions")] && c.CachedSessions < -1 {
		ch.Bad("cached_sessions", "must be -1 (no cache) or more, got %d", c.CachedSessions)
	}
	ch.AtLeast("repeat_limit", c.RepeatLimit, 1)
	checkPrices(ch, c.Prices)
}
