package irc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/irc/irctest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/tools"
)

// inboxHas counts the events and history messages whose text has part.
func inboxHas(env *storetest.Env, part string) int {
	var n, m int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items WHERE text LIKE ?", "%"+part+"%").Scan(&n)
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE text LIKE ?", "%"+part+"%").Scan(&m)
	return n + m
}

// Someone signed in to an account that is not allowed is told once, by
// a notice, and nothing of theirs is stored; so is someone using an
// allowed account's name as their nick without being signed in to it.
func TestStrangersAndImpostorsAreRefusedBeforeAnythingIsStored(t *testing.T) {
	w := newWorld(t)
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Text("hello Ana")
	cfg := w.config(bridge.Delivery{})
	cfg.AllowedNicks = append(cfg.AllowedNicks, "cara")
	a, _ := w.start(t, env, cfg)
	w.n.Account(t, "mallory", pw)
	w.n.Account(t, "cara", pw)
	mallory := w.n.Connect(t, "mallory", "mallory", pw)
	impostor := w.n.Connect(t, "Cara", "", "") // cara's nick, not signed in
	for _, p := range []string{"secret plan one", "secret plan two"} {
		mallory.Say(t, a.Nick(), p)
		impostor.Say(t, a.Nick(), p)
	}
	w.say(t, 0, "hi")
	bridgetest.WaitFor(t, "the answer to Ana", &w.people[0].Heard.Signal, func() bool { return len(w.answers(0)) == 1 })
	for _, p := range []*irctest.Person{mallory, impostor} {
		bridgetest.WaitFor(t, "the refusal", &p.Heard.Signal, func() bool { return len(p.Notices(botNick)) > 0 })
		if got := p.Notices(botNick); !slices.Equal(got, []string{bridge.TextRefused}) || len(p.From(botNick, "")) != 0 {
			t.Fatalf("%s was told %q and answered %q", p.Nick, got, p.From(botNick, ""))
		}
	}
	if n := inboxHas(env, "secret plan"); n != 0 {
		t.Fatalf("a stranger's message was stored %d times", n)
	}
	if n := len(env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns, want Ana's alone", n)
	}
	logs := w.logs.String()
	for _, want := range []string{"account=mallory", "irc.allowed_nicks", "nick=Cara", "the nick alone proves nothing"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}

// In a channel the bot answers the lines that address it; a question
// there is answered only by the person asked: anyone else's !approve
// is refused and runs nothing.
func TestInAChannelOnlyThePersonAskedApproves(t *testing.T) {
	w := newWorld(t)
	var runs atomic.Int32
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		return r.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}})
	env.Model.Text("hello team")
	env.Model.Call("purge_archive", `{}`)
	env.Model.Text("The archive is gone.")
	cfg := w.config(bridge.Delivery{})
	cfg.Channels, cfg.ChannelKeys = []string{"#team"}, map[string]string{"#team": "door-key"}
	a, _ := w.start(t, env, cfg)
	ana, bea := w.people[0], w.people[1]
	ana.Join("#team", "door-key")
	bea.Join("#team", "door-key")
	// The bot heard them join: all three are in #team.
	bridgetest.WaitFor(t, "the bot in #team", nil, func() bool { return a.knows("ana") && a.knows("bea") })
	ana.Say(t, "#team", "nobody asked the bot this")
	ana.Say(t, "#team", "LOADOUT, hello")
	bridgetest.WaitFor(t, "the answer", &ana.Heard.Signal, func() bool { return len(ana.From(botNick, "#team")) == 1 })
	ana.Say(t, "#team", "could loadout purge the archive?")
	bridgetest.WaitFor(t, "the question", &ana.Heard.Signal, func() bool { return anyHas(ana.From(botNick, "#team"), "/approve #") })
	q := code(t, ana.From(botNick, "#team"))
	bea.Say(t, "#team", "loadout: !approve "+q)
	bridgetest.WaitFor(t, "bea told it is not hers", &bea.Heard.Signal, func() bool {
		return anyHas(bea.From(botNick, "#team"), "Only the person who asked")
	})
	if runs.Load() != 0 {
		t.Fatal("someone else's approval ran the call")
	}
	ana.Say(t, "#team", "loadout: !approve "+q)
	bridgetest.WaitFor(t, "the call's answer", &ana.Heard.Signal, func() bool { return anyHas(ana.From(botNick, "#team"), "The archive is gone.") })
	if runs.Load() != 1 || inboxHas(env, "nobody asked") != 0 {
		t.Fatalf("%d runs; a line not for the bot stored: %d", runs.Load(), inboxHas(env, "nobody asked"))
	}
	if got := env.Model.Requests()[0].Messages; got[len(got)-1].Content != "hello" {
		t.Fatalf("the model read %q", got[len(got)-1].Content)
	}
}

// knows reports whether the bot knows the account of nick.
func (a *Adapter) knows(nick string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.accounts[fold(nick)]
	return ok
}

// A private answer goes to the nick only while it is signed in to the
// asker's account: once Ana has left and someone else took her nick,
// the answer is not sent to them.
func TestAPrivateAnswerDoesNotFollowANickToSomeoneElse(t *testing.T) {
	w := newWorld(t)
	env := storetest.NewEnv(t, storetest.Options{})
	env.Model.Push(chattest.Step{Text: "for Ana only", Delay: 2 * time.Second})
	a, _ := w.start(t, env, w.config(bridge.Delivery{}))
	w.say(t, 0, "tell me a secret")
	chattest.Eventually(t, "the turn to start", func() bool { return len(env.Model.Requests()) == 1 })
	w.people[0].Quit()
	impostor := w.n.Connect(t, "ana", "", "")
	ctx, cancel := context.WithTimeout(context.Background(), bridgetest.Wait)
	defer cancel()
	if err := a.Pipeline().Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := impostor.From(botNick, ""); len(got) != 0 {
		t.Fatalf("the impostor was sent %q", got)
	}
	if !strings.Contains(w.logs.String(), "no nick is signed in to the person's account") {
		t.Fatal("the log does not say why the answer was not sent")
	}
}

// A wrong password ends Run with an error naming the keys; a server
// whose certificate is not trusted is not signed in to.
func TestRefusedAccountAndUntrustedServer(t *testing.T) {
	w := newWorld(t)
	env := storetest.NewEnv(t, storetest.Options{})
	cfg := w.config(bridge.Delivery{})
	cfg.Password = "wrong"
	a := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	err := a.Run(context.Background())
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "irc.password") {
		t.Fatalf("Run: %v", err)
	}
	cfg = w.config(bridge.Delivery{})
	cfg.CAFile = ""
	a = New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	if _, err := a.dial(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("dial with an untrusted certificate: %v", err)
	}
}
