package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
)

// killedTriggers runs the kill suite on triggers: each chat is a
// Telegram group with a trigger of its own, and each message is a
// request to that trigger, signed, with a delivery id, and posted again
// until taken, as GitHub does.
func killedTriggers(t testing.TB) bridgetest.Killed {
	k := killedTelegram(t)
	var b strings.Builder
	b.WriteString(k.Config)
	b.WriteString("triggers:\n")
	for c := range bridgetest.KillChats {
		fmt.Fprintf(&b, "  - name: t%d\n    secret: %s\n    chat: \"telegram:%d\"\n    user: \"telegram:%d\"\n    prompt: Say what came.\n",
			c, hookSecret, -1000-c, 1000+c)
	}
	k.Config = b.String()
	k.Send = func(t testing.TB, addr string, c int, text string) {
		body := []byte(`{"event":` + strconv.Quote(text) + `}`)
		bridgetest.PostUntilTaken(t, "request "+strconv.Quote(text), func(int) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/hooks/t%d", addr, c), bytes.NewReader(body))
			req.Header.Set("X-Hub-Signature-256", bridge.HubSign(hookSecret, body))
			req.Header.Set("X-GitHub-Delivery", strings.ReplaceAll(text, " ", "-"))
			return req
		})
	}
	return k
}
