package main

import (
	"testing"

	"loadout/bridge/bridgetest"
)

// One message's processor time in the serving process, per channel,
// measured from outside through each channel's platform fake (the kill
// suite's set-ups), so the channels compare beside each other:
//
//	go test -tags sqlite_fts5 -run '^$' -bench BenchmarkMessageCost -benchtime 300x ./cmd/loadout
func BenchmarkMessageCost(b *testing.B) {
	for _, k := range killedChannels() {
		b.Run(k.name, func(b *testing.B) { bridgetest.MessageCost(b, k.setup(b), serveConfig) })
	}
}
