package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/feishu/feishutest"
)

// killedFeishu is Feishu's event callback under the kill suite: each
// chat is a person's private chat with the bot.
func killedFeishu(t testing.TB) bridgetest.Killed {
	fs := feishutest.New(t)
	people := make([]string, bridgetest.KillChats)
	for c := range people {
		people[c] = fmt.Sprintf("ou_kill%025d", c)
	}
	return bridgetest.Killed{
		Config: fmt.Sprintf("feishu:\n  enabled: true\n  app_id: %s\n  app_secret: %s\n  verification_token: %s\n  encrypt_key: %s\n"+
			"  api_url: %q\n  allowed_users: [%s]\n", feishutest.AppID, feishutest.AppSecret, feishutest.VerificationToken,
			feishutest.EncryptKey, fs.URL, strings.Join(people, ", ")),
		// Feishu delivers an event again, with its id, until it is
		// answered 200; each delivery is encrypted and signed anew.
		Send: func(t testing.TB, addr string, c int, text string) {
			_, plain := fs.Event(feishutest.Message{From: people[c], Text: text})
			bridgetest.PostUntilTaken(t, "message "+strconv.Quote(text), func(int) *http.Request {
				body := feishutest.Encrypt(feishutest.EncryptKey, plain)
				ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), strconv.FormatInt(time.Now().UnixNano(), 36)
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/feishu/events", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Lark-Request-Timestamp", ts)
				req.Header.Set("X-Lark-Request-Nonce", nonce)
				req.Header.Set("X-Lark-Signature", feishutest.Sign(ts, nonce, feishutest.EncryptKey, body))
				return req
			})
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				for _, m := range fs.SentTo(people[c]) {
					out[c] = append(out[c], strings.TrimSpace(m.Text))
				}
			}
			return out
		},
	}
}
