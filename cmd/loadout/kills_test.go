package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/bridge/email/emailtest"
	"loadout/bridge/slack/slacktest"
	"loadout/bridge/telegram/telegramtest"
	"loadout/bridge/whatsapp/whatsapptest"
)

// Found by measuring: a process killed from outside (a deploy, a node
// going away) was counted against whatever turns were in flight, so an
// ordinary message in flight at three kills was set aside as if it had
// ended the process itself. Each channel runs under bridgetest's kill
// suite: loadout serve is killed ten times at random moments with
// several chats in flight, and every message is answered once, in
// order, and nothing is quarantined. (The poison test in bridge shows a
// message that does end the process is still set aside.)
func TestKillsFromOutsideQuarantineNothing(t *testing.T) {
	for _, k := range killedChannels() {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			bridgetest.Kills(t, k.setup(t), serveConfig)
		})
	}
}

// killedChannel is a channel's set-up for the kill suite and the cost
// benchmark: its fake, and the Killed that drives it.
type killedChannel struct {
	name  string
	setup func(t testing.TB) bridgetest.Killed
}

// killedChannels are the channels the kill suite and the cost benchmark
// run, each on its platform's fake (IRC's on a real IRC network).
func killedChannels() []killedChannel {
	return []killedChannel{
		{"telegram", killedTelegram},
		{"slack", killedSlack},
		{"discord", killedDiscord},
		{"whatsapp", killedWhatsApp},
		{"email", killedEmail},
		{"feishu", killedFeishu},
		{"mattermost", killedMattermost},
		{"signal", killedSignal},
		{"irc", killedIRC},
		{"triggers", killedTriggers},
	}
}

// serveConfig is loadout serve on the config file at path, run by this
// test binary as main.
func serveConfig(_ testing.TB, path string) *exec.Cmd {
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=serve -config "+path)
	return c
}

func killedTelegram(t testing.TB) bridgetest.Killed {
	tg := telegramtest.New(t)
	users := make([]string, bridgetest.KillChats)
	for c := range users {
		users[c] = strconv.Itoa(1000 + c)
	}
	// Each chat is a group, where every answer is a reply to its message.
	return bridgetest.Killed{
		Config: fmt.Sprintf("telegram:\n  enabled: true\n  token: %q\n  api_endpoint: %q\n  allowed_users: [%s]\n"+
			"  send_per_second: -1\n  send_per_chat_second: -1\n  send_per_group_minute: -1\n",
			telegramtest.Token, tg.Endpoint(), strings.Join(users, ", ")),
		// Telegram keeps what was sent until the bot polls for it.
		Send: func(_ testing.TB, _ string, c int, text string) {
			tg.Push(telegramtest.Message{From: telegramtest.User{ID: int64(1000 + c)}, ChatID: int64(-1000 - c), ChatType: "group",
				Text: "@" + telegramtest.BotUserName + " " + text})
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for _, s := range tg.Sent() {
				out[-int(s.ChatID)-1000] = append(out[-int(s.ChatID)-1000], s.Text)
			}
			return out
		},
	}
}

func killedSlack(t testing.TB) bridgetest.Killed {
	fake := slacktest.NewServer(t)
	const secret = "signing-secret-for-kills"
	return bridgetest.Killed{
		Config: fmt.Sprintf("slack:\n  enabled: true\n  mode: events\n  bot_token: xoxb-kills\n  signing_secret: %s\n  api_url: %q\n"+
			"  allowed_users: [UOWNER]\n  send_per_channel_second: -1\n", secret, fake.APIURL),
		Send: func(t testing.TB, addr string, c int, text string) {
			var m int
			fmt.Sscanf(text, "c%d m%d", &c, &m)
			e := slacktest.DM(fmt.Sprintf("D%d", c), "UOWNER", text, fmt.Sprintf("%d.%06d", 100+m, c))
			body, err := json.Marshal(slacktest.Callback(fmt.Sprintf("Ev%d-%d", c, m), e))
			if err != nil {
				t.Error(err)
				return
			}
			bridgetest.PostUntilTaken(t, "event "+strconv.Quote(text), func(retry int) *http.Request {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
				req.Header = slacktest.Sign(secret, time.Now(), body)
				req.Header.Set("Content-Type", "application/json")
				if retry > 0 {
					req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
					req.Header.Set("X-Slack-Retry-Reason", "http_error")
				}
				return req
			})
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				out[c] = fake.Messages(fmt.Sprintf("D%d", c))
			}
			return out
		},
	}
}

func killedDiscord(t testing.TB) bridgetest.Killed {
	dc := discordtest.New(t)
	users := make([]string, bridgetest.KillChats)
	for c := range users {
		users[c] = strconv.Itoa(100 + c)
	}
	return bridgetest.Killed{
		Config: fmt.Sprintf("discord:\n  enabled: true\n  token: %q\n  api_url: %q\n  allowed_users: [%s]\n  send_per_channel_second: -1\n",
			discordtest.Token, dc.APIURL, strings.Join(users, ", ")),
		// Discord does not deliver again what was sent while the process
		// was down: the channel reads it back at its next start.
		Send: func(_ testing.TB, _ string, c int, text string) {
			dc.Post(discordtest.Message{Author: discordtest.User{ID: users[c], Name: "p" + users[c]}, Channel: dc.DM(users[c]), Content: text})
			time.Sleep(time.Duration(c*7) * time.Millisecond)
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				for _, s := range dc.Sent(dc.DM(users[c])) {
					out[c] = append(out[c], s.Content)
				}
			}
			return out
		},
		Ready:     dc.Connected,
		WhileDown: true,
		Check: func(t *testing.T, log string) {
			if !strings.Contains(log, "read back messages sent while disconnected") {
				t.Error("no process read back what was sent while it was down")
			}
		},
	}
}

func killedWhatsApp(t testing.TB) bridgetest.Killed {
	wa := whatsapptest.New(t)
	numbers := make([]string, bridgetest.KillChats)
	for c := range numbers {
		numbers[c] = fmt.Sprintf("+1555000%04d", c)
	}
	return bridgetest.Killed{
		Config: fmt.Sprintf("whatsapp:\n  enabled: true\n  access_token: %s\n  phone_number_id: %q\n  app_secret: %s\n  verify_token: %s\n"+
			"  api_url: %q\n  allowed_numbers: [\"%s\"]\n", whatsapptest.Token, whatsapptest.PhoneNumberID, whatsapptest.AppSecret,
			whatsapptest.VerifyToken, wa.APIURL, strings.Join(numbers, `", "`)),
		// Meta delivers a notification again until it is answered 200.
		Send: func(t testing.TB, addr string, c int, text string) {
			_, body := wa.Body(whatsapptest.Message{From: strings.TrimPrefix(numbers[c], "+"), ID: "wamid." + strings.ReplaceAll(text, " ", ""), Text: text})
			sig := whatsapptest.Sign(whatsapptest.AppSecret, body)
			bridgetest.PostUntilTaken(t, "message "+strconv.Quote(text), func(int) *http.Request {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/whatsapp/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Hub-Signature-256", sig)
				return req
			})
		},
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				out[c] = wa.Texts(strings.TrimPrefix(numbers[c], "+"))
			}
			return out
		},
	}
}

func killedEmail(t testing.TB) bridgetest.Killed {
	srv := emailtest.New(t, emailtest.Options{})
	people := make([]string, bridgetest.KillChats)
	for c := range people {
		people[c] = fmt.Sprintf("p%d@example.org", c)
	}
	var ids atomic.Int64
	return bridgetest.Killed{
		Config: fmt.Sprintf("email:\n  enabled: true\n  address: %s\n  password: %s\n  imap_url: %s\n  smtp_url: %s\n"+
			"  trusted_authserv_id: %s\n  allowed_senders: [%s]\n  per_sender_hour: 1000\n", emailtest.Address, emailtest.Password, srv.IMAPURL(), srv.SMTPURL(),
			emailtest.AuthservID, strings.Join(people, ", ")),
		// The mailbox keeps what arrives while nobody reads it. Each chat
		// is one thread.
		Send: func(t testing.TB, _ string, c int, text string) {
			srv.Deliver(t, emailtest.Mail{From: people[c], ID: fmt.Sprintf("m%d@example.org", ids.Add(1)), Subject: "Re: thread",
				References: []string{fmt.Sprintf("thread-%d@example.org", c)}, Text: text, Auth: emailtest.Pass("example.org")})
		},
		// A part whose sending a kill cut after the SMTP server took it,
		// but before the process could record that, goes again with the
		// same Message-ID, which mail stores and clients show once.
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			bodies := map[string]string{}
			for _, s := range srv.Sent() {
				c := slices.Index(people, s.To)
				if body, ok := bodies[s.ID]; ok || c < 0 {
					if ok && body != s.Body() {
						t.Errorf("two messages with Message-ID %s: %q and %q", s.ID, body, s.Body())
					}
					continue
				}
				bodies[s.ID] = s.Body()
				out[c] = append(out[c], s.Body())
			}
			return out
		},
		Ready:     func() bool { return srv.Connections() > 0 },
		WhileDown: true,
		Check: func(t *testing.T, log string) {
			if !strings.Contains(log, "read back messages that arrived while disconnected") {
				t.Error("no process read back what arrived while it was down")
			}
			for _, m := range srv.Mailbox(t, "INBOX") {
				if !m.Seen {
					t.Errorf("message %d was left unseen", m.UID)
				}
			}
		},
	}
}
