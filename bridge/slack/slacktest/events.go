package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// Deliveries: the payloads Slack sends the app — Events API callbacks,
// slash commands and interactions — as they go over Socket Mode (Send)
// or are posted, signed, to the app's request URLs.

// Event is an inner event of the Events API.
type Event map[string]any

// DM is a direct message from user in channel ("D…") with timestamp ts.
func DM(channel, user, text, ts string) Event {
	return Event{"type": "message", "channel": channel, "channel_type": "im", "user": user, "text": text, "ts": ts, "event_ts": ts}
}

// Mention is an app_mention in channel; threadTS is "" at the top level.
func Mention(channel, user, text, ts, threadTS string) Event {
	e := Event{"type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts, "event_ts": ts}
	if threadTS != "" {
		e["thread_ts"] = threadTS
	}
	return e
}

// Callback wraps an inner event in an event_callback with eventID.
func Callback(eventID string, e Event) map[string]any {
	return map[string]any{"token": "legacy", "team_id": TeamID, "api_app_id": "A0001", "type": "event_callback",
		"event": e, "event_id": eventID, "event_time": time.Now().Unix()}
}

var triggers atomic.Int64

// SlashCommand is the payload of "/loadout <text>" typed by user in
// channel, answered through responseURL. Each has its own trigger_id, as
// each invocation on Slack does.
func SlashCommand(channel, user, text, responseURL string) map[string]string {
	return map[string]string{"command": "/loadout", "text": text, "team_id": TeamID, "channel_id": channel,
		"user_id": user, "user_name": "someone", "response_url": responseURL,
		"trigger_id": fmt.Sprintf("1.2.%d", triggers.Add(1)), "api_app_id": "A0001"}
}

// BlockAction is the payload of a block_actions interaction: user
// pressed the button actionID (with value) under the bot's message ts in
// channel (in thread, when not ""), whose text was text.
func BlockAction(user, channel, thread, ts, text, actionID, value string) map[string]any {
	container := map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false}
	msg := map[string]any{"type": "message", "ts": ts, "text": text, "user": BotUserID}
	if thread != "" {
		container["thread_ts"] = thread
		msg["thread_ts"] = thread
	}
	return map[string]any{
		"type": "block_actions", "trigger_id": fmt.Sprintf("9.8.%d", triggers.Add(1)), "api_app_id": "A0001",
		"team": map[string]any{"id": TeamID}, "user": map[string]any{"id": user, "team_id": TeamID},
		"channel": map[string]any{"id": channel}, "container": container, "message": msg,
		"actions": []map[string]any{{"type": "button", "action_id": actionID, "block_id": "loadout_approval", "value": value,
			"action_ts": fmt.Sprintf("1700000001.%06d", triggers.Add(1))}},
	}
}

// Interactivity encodes an interaction payload as Slack posts it to an
// interactivity request URL.
func Interactivity(payload map[string]any) []byte {
	b, _ := json.Marshal(payload)
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// Form encodes a slash command payload as Slack posts it.
func Form(cmd map[string]string) []byte {
	v := url.Values{}
	for k, x := range cmd {
		v.Set(k, x)
	}
	return []byte(v.Encode())
}

// Sign returns request headers carrying Slack's v0 signature of body at
// time at, made with secret.
func Sign(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}
