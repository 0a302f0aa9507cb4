package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"loadout/bridge/slack/slacktest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/google/googletest"
	"loadout/settings"
)

// googleYAML is the google section for a fake OAuth server.
func googleYAML(oauth *googletest.OAuthServer) string {
	return fmt.Sprintf("google:\n  client_id: %s\n  client_secret: s\n  token_key: %s\n  redirect_url: http://127.0.0.1:1/oauth/google/callback\n  auth_url: %s\n  token_url: %s\n  revoke_url: %s\n",
		oauth.ClientID, base64.StdEncoding.EncodeToString(make([]byte, 32)), oauth.AuthURL(), oauth.TokenURL(), oauth.RevokeURL())
}

// Through the Telegram fake: /connect google in a group gets no link,
// only the deep link to the private chat; /start connect there (what the
// deep link sends) gets the link, in the private chat.
func TestTelegramGroupNeverGetsTheConnectLink(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	serveTelegram(t, tg, model, googleYAML(oauth))
	ana := telegramtest.User{ID: 42, UserName: "ana"}
	tg.Push(telegramtest.Message{From: ana, ChatID: -100123, ChatType: "group", Text: "/connect@" + telegramtest.BotUserName + " google"})
	sent := tg.WaitSent(t, 1)
	if strings.Contains(sent[0].Text, oauth.AuthURL()) || !strings.Contains(sent[0].Text, "https://t.me/"+telegramtest.BotUserName+"?start=connect") {
		t.Fatalf("group answer = %q", sent[0].Text)
	}
	tg.Push(telegramtest.Message{From: ana, Text: "/start connect"})
	sent = tg.WaitSent(t, 2)
	if sent[1].ChatID != 42 || !strings.Contains(sent[1].Text, strings.ReplaceAll(oauth.AuthURL(), "&", "&amp;")) && !strings.Contains(sent[1].Text, oauth.AuthURL()) {
		t.Fatalf("private answer = %+v", sent[1])
	}
	if len(model.Requests()) != 0 {
		t.Fatal("a command reached the model")
	}
}

// Through the Slack fake: connect google mentioned in a channel thread
// gets no link; the same in a direct message does.
func TestSlackThreadNeverGetsTheConnectLink(t *testing.T) {
	oauth := googletest.NewOAuthServer(t, "id.apps.googleusercontent.com")
	a, fake, _ := slackTestApp(t, "socket")
	cfg := a.cfg
	gcfg, err := settings.Parse([]byte(googleYAML(oauth)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Google = gcfg.Google
	a.db.Close()
	a, err = newApp(t.Context(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	runSlack(t, a)
	fake.WaitConnected(t)
	fake.Send(t, "e1", "events_api", slacktest.Callback("Ev1", slacktest.Mention("C1", "UOWNER", "<@"+slacktest.BotUserID+"> connect google", "300.1", "")), 0)
	post := fake.WaitCalls(t, "chat.postMessage", 1)[0].Params
	if post["thread_ts"] != "300.1" || strings.Contains(post["text"], oauth.AuthURL()) || !strings.Contains(post["text"], "direct message") {
		t.Fatalf("thread answer = %v", post)
	}
	fake.Send(t, "e2", "events_api", slacktest.Callback("Ev2", slacktest.DM("D1", "UOWNER", "connect google", "301.1")), 0)
	post = fake.WaitCalls(t, "chat.postMessage", 2)[1].Params
	if post["channel"] != "D1" || !strings.Contains(post["text"], strings.TrimPrefix(oauth.AuthURL(), "http://")) {
		t.Fatalf("DM answer = %v", post)
	}
}
