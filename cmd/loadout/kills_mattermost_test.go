package main

import (
	"fmt"
	"strings"
	"testing"

	"loadout/bridge/bridgetest"
	"loadout/bridge/mattermost/mattermosttest"
)

// killedMattermost is the Mattermost channel under the kill suite: each
// chat a person's direct message with the bot. Mattermost keeps what is
// posted while the process is down, and the channel reads it back when
// its websocket connects again.
func killedMattermost(t testing.TB) bridgetest.Killed {
	mm := mattermosttest.New(t)
	users := make([]string, bridgetest.KillChats)
	for c := range users {
		users[c] = mattermosttest.ID(fmt.Sprintf("person%d", c))
	}
	return bridgetest.Killed{
		Config: fmt.Sprintf("mattermost:\n  enabled: true\n  url: %q\n  token: %q\n  allowed_users: [%s]\n  send_per_second: -1\n",
			mm.URL, mattermosttest.Token, strings.Join(users, ", ")),
		Send: func(_ testing.TB, _ string, c int, text string) {
			mm.Send(mattermosttest.Post{User: users[c], Channel: mm.DM(users[c]), Message: text})
		},
		WhileDown: true,
		// The first process keeps when the channel first ran before it
		// connects: what is posted from then on is answered.
		Ready: func() bool { return mm.Sessions() > 0 },
		Answers: func() [][]string {
			out := make([][]string, bridgetest.KillChats)
			for c := range out {
				for _, p := range mm.Sent(mm.DM(users[c])) {
					out[c] = append(out[c], p.Message)
				}
			}
			return out
		},
	}
}
