package discord

import (
	"context"
	"testing"

	"loadout/bridge/discord/discordtest"
	"loadout/store/storetest"
)

// The web side asks whether a person is let in by their key alone, as a
// direct message of theirs would be judged: by id, by the @username
// they last wrote with, or by a role in an allowed server (asked of
// Discord). After a restart with a list that no longer names bea, her
// kept username no longer lets her in.
func TestAdmitsJudgesAKeyAsADirectMessage(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	admits := func(key string) bool {
		t.Helper()
		ok, err := r.a.Admits(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !admits("discord:"+ana.ID) || !admits("discord:"+cleo.ID) || admits("discord:"+mallory.ID) || admits("discord:") || admits("telegram:"+ana.ID) {
		t.Fatal("by id and role")
	}
	if admits("discord:" + bea.ID) {
		t.Fatal("bea is let in before she wrote: nothing says her id is @bea's")
	}
	r.env.Model.Text("hello")
	r.dc.Post(discordtest.Message{Author: bea, Channel: r.dc.DM(bea.ID), Content: "hi"})
	r.waitSent(r.dc.DM(bea.ID), 1)
	if !admits("discord:" + bea.ID) {
		t.Fatal("bea is not let in after she wrote")
	}
	r.restart(func(c *Config) { c.AllowedUsers = []string{ana.ID} })
	if admits("discord:"+bea.ID) || !admits("discord:"+ana.ID) {
		t.Fatal("after the restart without @bea")
	}
}
