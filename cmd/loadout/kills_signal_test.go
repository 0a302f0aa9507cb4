package main

import (
	"fmt"
	"strings"
	"testing"

	"loadout/bridge/bridgetest"
	"loadout/bridge/signal/signaltest"
)

// killedSignal is the Signal channel under the kill suite, on the fake
// signal-cli daemon: each chat is one person's direct chat.
func killedSignal(t testing.TB) bridgetest.Killed {
	fake := signaltest.New(t)
	people := make([]signaltest.Person, bridgetest.KillChats)
	numbers := make([]string, len(people))
	for c := range people {
		numbers[c] = fmt.Sprintf("+1555100%04d", c)
		people[c] = signaltest.Person{Number: numbers[c], UUID: fmt.Sprintf("a0000000-0000-4000-8000-%012d", c)}
	}
	return bridgetest.Killed{
		Config: fmt.Sprintf("signal:\n  enabled: true\n  rpc_url: %q\n  account: %q\n  allowed_numbers: [\"%s\"]\n"+
			"  poll_timeout: 1s\n  send_per_second: -1\n", fake.URL, signaltest.Account, strings.Join(numbers, `", "`)),
		// In manual receive mode what people send waits on the Signal
		// server until a receive call takes it.
		Send: func(_ testing.TB, _ string, c int, text string) {
			fake.Push(signaltest.Message{From: people[c], Text: text})
		},
		WhileDown: true,
		Loses: "signal-cli hands each message over once, to whichever receive call is open, and takes no acknowledgement " +
			"(docs/signal.md): one a kill cuts before it is stored is gone",
		Answers: func() [][]string {
			out := make([][]string, len(people))
			for c, p := range people {
				out[c] = signaltest.Texts(fake.To(p))
			}
			return out
		},
		Ready: func() bool { return len(fake.Calls("receive")) > 0 },
	}
}
