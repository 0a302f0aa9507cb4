package discord

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/chat/chattest"
	"loadout/store"
	"loadout/store/storetest"
)

// Environment of a replica process: the fake Discord's API and the
// database the replicas share.
const (
	envReplicaAPI = "LOADOUT_TEST_DISCORD_REPLICA_API"
	envReplicaDB  = "LOADOUT_TEST_DISCORD_REPLICA_DB"
)

// TestDiscordReplica is a process of TestGatewayMovesWhenItsHolderIsKilled:
// the channel on the parent's fake Discord and shared database, holding
// the gateway under a lease while it can. It runs until it is killed.
func TestDiscordReplica(t *testing.T) {
	api := os.Getenv(envReplicaAPI)
	if api == "" || os.Getenv(bridgetest.EnvReplica) == "" {
		t.Skip("run by TestGatewayMovesWhenItsHolderIsKilled")
	}
	env, d := bridgetest.ReplicaEnv(t, os.Getenv(envReplicaDB), chattest.NewEchoServer(t))
	a := New(Config{Token: discordtest.Token, APIURL: api, AllowedUsers: []string{ana.ID}, AllowedGuilds: []string{g1},
		SendPerChannelSecond: -1, Delivery: d}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.Run(context.Background())
}

// Two processes share one database (a file, or PostgreSQL with
// LOADOUT_TEST_DSN); the first holds the gateway and answers a direct
// message and a mention in a server's channel the second never saw.
// The first is killed (SIGKILL); a message in each conversation is sent
// while nobody holds the gateway, and Discord never delivers those to
// anyone. The second takes the gateway over once the lease expires,
// reads back both conversations from the cursors the first stored, and
// answers each message once; then the next ones as they come.
func TestGatewayMovesWhenItsHolderIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dc := discordtest.New(t)
	dc.Channel(g1, c1)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "loadout.db")
	db, err := store.OpenTest(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	env := []string{envReplicaAPI + "=" + dc.APIURL, envReplicaDB + "=" + dbPath}
	holder := func() string { return bridgetest.LeaseHolder(t, db, "discord gateway") }

	one := bridgetest.StartReplica(t, dir, "TestDiscordReplica", "one", env...)
	bridgetest.Await(t, "the first process to hold the gateway", func() bool { return holder() == "one" && dc.Connected() })
	two := bridgetest.StartReplica(t, dir, "TestDiscordReplica", "two", env...)
	// The second has read the cursors, before the server's channel has
	// one.
	two.WaitLogged(t, "discord channel ready")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first process logged:\n%s\nthe second:\n%s", bridgetest.Tail(one.Log(), 3000), bridgetest.Tail(two.Log(), 5000))
		}
	})

	dmOf := dc.DM(ana.ID)
	var dm, server []string
	post := func(text string) {
		dm = append(dm, text)
		dc.Post(discordtest.Message{Author: ana, Channel: dmOf, Content: text})
		server = append(server, text+" here")
		dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Mention: true, Content: text + " here"})
	}
	answered := func(channel string, texts []string) bool { return len(dc.Sent(channel)) >= len(texts) }
	settled := func() {
		t.Helper()
		bridgetest.Await(t, "every message to be answered", func() bool {
			return answered(dmOf, dm) && answered(c1, server) && bridgetest.Idle(t, db, "discord")
		})
	}
	post("one")
	settled()
	one.Kill()
	post("while nobody holds the gateway")
	bridgetest.Await(t, "the second process to take the gateway over", func() bool { return holder() == "two" })
	settled()
	post("after the move")
	settled()

	for channel, texts := range map[string][]string{dmOf: dm, c1: server} {
		var got, want []string
		for _, s := range dc.Sent(channel) {
			got = append(got, s.Content)
		}
		for _, text := range texts {
			want = append(want, "re: "+text)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("channel %s was answered\n%q\nwant each message once, in order:\n%q", channel, got, want)
		}
	}
	if !strings.Contains(two.Log(), "read back messages sent while disconnected") {
		t.Fatal("the second process did not read back what was sent while nobody held the gateway")
	}
}

// Found by reading: the channel's Build left out what the process gives
// every channel, so under loadout serve each replica opened the gateway
// of its own (and kept no journal, files or claims). Built from its
// declaration, the channel runs the gateway as the process's duty.
func TestBuildTakesTheProcessDelivery(t *testing.T) {
	dc := discordtest.New(t)
	env := storetest.NewEnv(t, storetest.Options{})
	var mu sync.Mutex
	var duties []string
	exclusive := func(ctx context.Context, duty string, run func(ctx context.Context) error) error {
		mu.Lock()
		duties = append(duties, duty)
		mu.Unlock()
		return run(ctx)
	}
	cfg := Config{Enabled: true, Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}}
	ch, err := Kind().Build(context.Background(), cfg, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store,
		Delivery: bridge.Delivery{Exclusive: exclusive, ShutdownGrace: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, dc, ch.(*Adapter))()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(duties, []string{"discord gateway"}) {
		t.Fatalf("duties run through the process's Exclusive: %q", duties)
	}
}
