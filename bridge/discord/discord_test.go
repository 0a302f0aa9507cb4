package discord

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	goopenai "github.com/sashabaranov/go-openai"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/discord/discordtest"
	"loadout/chat"
	"loadout/chat/chattest"
	"loadout/config"
	"loadout/logs"
	"loadout/store/storetest"
	"loadout/tools/files"
)

// The servers and channels of the tests: G1 is allowed, G2 is not; C1
// is a channel of G1 and T1 a thread in it.
const (
	g1, g2   = "700000000000000001", "700000000000000002"
	c1, t1   = "710000000000000001", "710000000000000002"
	c2       = "710000000000000003" // in G2
	roleOK   = "720000000000000001"
	roleNone = "720000000000000002"
)

var (
	cleo    = discordtest.User{ID: "44", Name: "cleo"}     // allowed by role in G1
	mallory = discordtest.User{ID: "666", Name: "mallory"} // nobody
)

// rig is one adapter on the fake Discord, with an engine on a temp
// database.
type rig struct {
	t    *testing.T
	dc   *discordtest.Server
	env  *storetest.Env
	a    *Adapter
	logs *chattest.LogBuffer
	stop func()
	// slept are the waits the adapter asked for (rate limits, backoff).
	mu    sync.Mutex
	slept []time.Duration
}

func newRig(t *testing.T, o storetest.Options, mut func(*Config)) *rig {
	r := &rig{t: t, dc: discordtest.New(t), env: storetest.NewEnv(t, o), logs: &chattest.LogBuffer{}}
	r.dc.Channel(g1, c1)
	r.dc.Channel(g1, t1)
	r.dc.Channel(g2, c2)
	r.dc.Roles(g1, cleo.ID, roleOK)
	r.dc.Roles(g1, mallory.ID, roleNone)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the channel logged:\n%s", bridgetest.Tail(r.logs.String(), 6000))
		}
	})
	r.start(mut)
	return r
}

func (r *rig) config(mut func(*Config)) Config {
	c := Config{Token: discordtest.Token, APIURL: r.dc.APIURL, AllowedUsers: []string{ana.ID, "@" + bea.Name},
		AllowedGuilds: []string{g1}, AllowedRoles: []string{roleOK}, SendPerChannelSecond: -1,
		Delivery: bridge.Delivery{ShutdownGrace: time.Nanosecond,
			Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		r.mu.Lock()
		r.slept = append(r.slept, d)
		r.mu.Unlock()
		return ctx.Err()
	}
	if mut != nil {
		mut(&c)
	}
	return c
}

// start runs a new adapter, as a new process would, on the same
// database.
func (r *rig) start(mut func(*Config)) {
	r.a = New(r.config(mut), bridge.NewRouter(r.env.Engine, "loadout"), r.env.Store)
	r.stop = run(r.t, r.dc, r.a)
}

func (r *rig) restart(mut func(*Config)) {
	r.stop()
	r.env = storetest.NewEnv(r.t, storetest.Options{DBPath: r.env.DBPath, Model: r.env.Model})
	r.start(mut)
}

func (r *rig) sleeps() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.slept)
}

// waitSent waits until the bot has n messages in channel.
func (r *rig) waitSent(channel string, n int) []discordtest.Sent {
	r.t.Helper()
	r.dc.WaitFor(r.t, "the bot's messages", func() bool { return len(r.dc.Sent(channel)) >= n })
	return r.dc.Sent(channel)
}

// lastAsked is the last user message the model was asked.
func (r *rig) lastAsked() string {
	m := r.env.Model.Last(r.t).Messages
	return m[len(m)-1].Content
}

func contents(s []discordtest.Sent) []string {
	out := make([]string, len(s))
	for i, m := range s {
		out[i] = m.Content
	}
	return out
}

// In a server the bot answers only what mentions it or replies to it,
// without the mention, replying to the person's message.
func TestServerMessagesNeedAMentionOrAReply(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Text("first answer")
	r.env.Model.Text("second answer")
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "just talking among ourselves"})
	asked := r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "what time is it?", Mention: true})
	sent := r.waitSent(c1, 1)
	if sent[0].Content != "first answer" || sent[0].Reply != asked {
		t.Fatalf("sent %+v, want the answer replying to %s", sent[0], asked)
	}
	if got := r.lastAsked(); got != "what time is it?" {
		t.Fatalf("the model read %q", got)
	}
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "and tomorrow?", ReplyTo: sent[0].ID})
	sent = r.waitSent(c1, 2)
	if sent[1].Content != "second answer" || r.lastAsked() != "and tomorrow?" {
		t.Fatalf("the reply to the bot: sent %q, the model read %q", contents(sent), r.lastAsked())
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(r.env.Model.Requests()); n != 2 {
		t.Fatalf("%d turns, want 2: a message without a mention was answered", n)
	}
}

// A thread is a conversation of its own: its own chat key and session.
func TestThreadsKeepTheirOwnSession(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Text("in the channel")
	r.env.Model.Text("in the thread")
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "remember the word marmalade", Mention: true})
	r.waitSent(c1, 1)
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: t1, Content: "what word?", Mention: true})
	if sent := r.waitSent(t1, 1); sent[0].Content != "in the thread" {
		t.Fatalf("the thread got %q", contents(sent))
	}
	for _, m := range r.env.Model.Last(t).Messages {
		if strings.Contains(m.Content, "marmalade") {
			t.Fatal("the thread's turn saw the channel's conversation")
		}
	}
	var keys []string
	r.env.Store.Gorm().Raw("SELECT chat_key FROM inbox_items WHERE channel = 'discord' ORDER BY seq").Scan(&keys)
	if want := []string{chatKey(g1, c1), chatKey(g1, t1)}; !slices.Equal(keys, want) {
		t.Fatalf("chat keys %q, want %q", keys, want)
	}
}

// Who may talk to the bot: allowed_users anywhere the bot listens,
// allowed_roles' members in their server (and in direct messages), only
// in allowed_guilds. Strangers get the one refusal, and the log has their
// id; a server not allowed is not answered at all.
func TestAllowlists(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	for range 4 {
		r.env.Model.Text("hello")
	}
	// By role, in the server and in a direct message.
	r.dc.Post(discordtest.Message{Author: cleo, Guild: g1, Channel: c1, Content: "hi", Mention: true, Roles: []string{roleOK}})
	r.waitSent(c1, 1)
	r.dc.Post(discordtest.Message{Author: cleo, Channel: r.dc.DM(cleo.ID), Content: "hi in private"})
	if sent := r.waitSent(r.dc.DM(cleo.ID), 1); sent[0].Content != "hello" {
		t.Fatalf("cleo's direct message got %q", contents(sent))
	}
	// By @username.
	r.dc.Post(discordtest.Message{Author: bea, Channel: r.dc.DM(bea.ID), Content: "hi"})
	r.waitSent(r.dc.DM(bea.ID), 1)
	// A stranger: refused once, in the server and in private.
	r.dc.Post(discordtest.Message{Author: mallory, Guild: g1, Channel: c1, Content: "let me in", Mention: true, Roles: []string{roleNone}})
	if sent := r.waitSent(c1, 2); sent[1].Content != bridge.TextRefused {
		t.Fatalf("mallory got %q", contents(sent))
	}
	r.dc.Post(discordtest.Message{Author: mallory, Channel: r.dc.DM(mallory.ID), Content: "please"})
	// An allowed person in a server not allowed: nothing.
	r.dc.Post(discordtest.Message{Author: ana, Guild: g2, Channel: c2, Content: "hi", Mention: true})
	// A mark to wait for.
	r.dc.Post(discordtest.Message{Author: ana, Channel: r.dc.DM(ana.ID), Content: "last"})
	r.waitSent(r.dc.DM(ana.ID), 1)
	time.Sleep(100 * time.Millisecond)
	if got := r.dc.Sent(r.dc.DM(mallory.ID)); len(got) != 0 {
		t.Fatalf("mallory was answered twice: %q", contents(got))
	}
	if got := r.dc.Sent(c2); len(got) != 0 {
		t.Fatalf("a server not allowed was answered: %q", contents(got))
	}
	if n := len(r.env.Model.Requests()); n != 4 {
		t.Fatalf("%d turns, want 4 (cleo twice, bea, ana)", n)
	}
	log := r.logs.String()
	if !strings.Contains(log, "user_id="+mallory.ID) || !strings.Contains(log, "discord.allowed_guilds") || strings.Contains(log, "let me in") {
		t.Fatalf("the log does not name mallory and the server, or holds her text:\n%s", log)
	}
}

// Empty allowlists allow nobody.
func TestEmptyAllowlistsAllowNobody(t *testing.T) {
	r := newRig(t, storetest.Options{}, func(c *Config) { c.AllowedUsers, c.AllowedRoles = nil, nil })
	r.dc.Post(discordtest.Message{Author: ana, Channel: r.dc.DM(ana.ID), Content: "hi"})
	if sent := r.waitSent(r.dc.DM(ana.ID), 1); sent[0].Content != bridge.TextRefused {
		t.Fatalf("ana got %q", contents(sent))
	}
	if n := len(r.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns", n)
	}
}

// The slash commands are registered globally, or in each server of
// discord.guilds; they are the router's, connect included when present.
func TestSlashCommandsRegistered(t *testing.T) {
	want := []string{"help", "clear", "status", "approve", "deny", "always", "rules", "audit", "cancel", "connect"}
	withConnect := func(r *bridge.Router) {
		r.Register(bridge.Command{Name: "connect", Args: "google", Help: "connect your Google account",
			Run: func(context.Context, chat.Inbound, string) (string, error) { return "a link", nil }})
	}
	t.Run("global", func(t *testing.T) {
		dc := discordtest.New(t)
		env := storetest.NewEnv(t, storetest.Options{})
		router := bridge.NewRouter(env.Engine, "loadout")
		withConnect(router)
		a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}}, router, env.Store)
		run(t, dc, a)
		dc.WaitFor(t, "the commands registered", func() bool { return len(dc.Commands("")) > 0 })
		if got := dc.Commands(""); !sameSet(got, want) {
			t.Fatalf("global commands %q, want %q", got, want)
		}
	})
	t.Run("per server", func(t *testing.T) {
		dc := discordtest.New(t)
		env := storetest.NewEnv(t, storetest.Options{})
		router := bridge.NewRouter(env.Engine, "loadout")
		withConnect(router)
		a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}, Guilds: []string{g1, g2}}, router, env.Store)
		run(t, dc, a)
		dc.WaitFor(t, "the commands registered", func() bool { return len(dc.Commands(g2)) > 0 })
		if !sameSet(dc.Commands(g1), want) || !sameSet(dc.Commands(g2), want) || len(dc.Commands("")) != 0 {
			t.Fatalf("commands: %q in G1, %q in G2, %q global", dc.Commands(g1), dc.Commands(g2), dc.Commands(""))
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A slash command is answered through its interaction: deferred at once,
// then followed up with the router's answer, seen only by the person in
// a server. A stranger's command is refused the same way.
func TestSlashCommandsAnswered(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	dm := r.dc.DM(ana.ID)
	id := r.dc.Command(ana, "", dm, "status", "")
	sent := r.waitSent(dm, 1)
	if resp := r.dc.Responses(id); len(resp) != 1 || resp[0].Type != 5 || resp[0].Flags&64 != 0 {
		t.Fatalf("responses %+v, want one deferred answer, public in a direct message", resp)
	}
	if sent[0].Interaction != id || !strings.Contains(sent[0].Content, "No conversation yet") {
		t.Fatalf("follow-up %+v", sent[0])
	}
	id = r.dc.Command(ana, g1, c1, "help", "")
	sent = r.waitSent(c1, 1)
	if resp := r.dc.Responses(id); len(resp) != 1 || resp[0].Type != 5 || resp[0].Flags&64 == 0 {
		t.Fatalf("responses %+v, want a deferred answer only ana sees", resp)
	}
	if !sent[0].Ephemeral || !strings.Contains(sent[0].Content, "/clear") {
		t.Fatalf("follow-up %+v", sent[0])
	}
	id = r.dc.Command(mallory, g1, c1, "status", "")
	r.dc.WaitFor(t, "the refusal", func() bool { return len(r.dc.Responses(id)) == 1 })
	if resp := r.dc.Responses(id)[0]; resp.Type != 4 || resp.Flags&64 == 0 || resp.Content != bridge.TextRefused {
		t.Fatalf("mallory's command was answered %+v", resp)
	}
	if n := len(r.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns for commands", n)
	}
}

// A 429 is waited out for its retry_after (through the adapter's clock,
// not the wall's) and the message posted once; a global one holds the
// bot's other requests too.
func TestRateLimitsAreWaitedOut(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(map[bool]string{false: "route", true: "global"}[global], func(t *testing.T) {
			r := newRig(t, storetest.Options{}, nil)
			dm := r.dc.DM(ana.ID)
			r.env.Model.Text("one")
			r.env.Model.Text("two")
			r.dc.RateLimit("POST", "/channels/*/messages", 2.5, global)
			r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hi"})
			r.waitSent(dm, 1)
			limited := 0
			for _, d := range r.sleeps() {
				if d > 2*time.Second && d <= 2500*time.Millisecond {
					limited++
				}
			}
			if limited == 0 {
				t.Fatalf("waits %v, want one of 2.5s", r.sleeps())
			}
			before := len(r.sleeps())
			r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "again"})
			if sent := r.waitSent(dm, 2); !slices.Equal(contents(sent), []string{"one", "two"}) {
				t.Fatalf("sent %q", contents(sent))
			}
			held := len(r.sleeps()) > before
			if held != global {
				t.Fatalf("global %v: the next requests waited %v (waits %v)", global, held, r.sleeps())
			}
			if n := len(r.dc.Calls("POST", "/channels/*/messages")); n != 3 {
				t.Fatalf("%d posts, want 3 (one refused, two taken)", n)
			}
		})
	}
}

// A dropped gateway connection is resumed: what happened meanwhile is
// delivered by the resume, answered once.
func TestDroppedConnectionResumes(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	dm := r.dc.DM(ana.ID)
	r.env.Model.Text("before")
	r.env.Model.Text("during")
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "before the drop"})
	r.waitSent(dm, 1)
	r.dc.Drop()
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "while dropped"})
	r.dc.WaitFor(t, "the resume", func() bool { _, resumes, _, _ := r.dc.Gateway(); return resumes == 1 })
	if sent := r.waitSent(dm, 2); !slices.Equal(contents(sent), []string{"before", "during"}) {
		t.Fatalf("sent %q", contents(sent))
	}
	if ids, _, _, _ := r.dc.Gateway(); ids != 1 {
		t.Fatalf("%d identifies, want the one session resumed", ids)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(r.env.Model.Requests()); n != 2 {
		t.Fatalf("%d turns", n)
	}
}

// A session that cannot be resumed starts anew, and what the old one
// never delivered is read back from the API.
func TestFailedResumeReadsBack(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	dm := r.dc.DM(ana.ID)
	r.env.Model.Text("before")
	r.env.Model.Text("missed")
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "before the drop"})
	r.waitSent(dm, 1)
	r.dc.NoResume(true)
	r.dc.Drop()
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "lost by the gateway"})
	if sent := r.waitSent(dm, 2); !slices.Equal(contents(sent), []string{"before", "missed"}) {
		t.Fatalf("sent %q", contents(sent))
	}
	if ids, _, _, _ := r.dc.Gateway(); ids != 2 {
		t.Fatalf("%d identifies, want a new session", ids)
	}
}

// Messages sent while the bot was down are read back at start, after the
// last one stored, and answered once, in order.
func TestMessagesSentWhileDownAreReadBack(t *testing.T) {
	r := newRig(t, storetest.Options{Model: echoModel(t)}, nil)
	dm := r.dc.DM(ana.ID)
	first := r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hello"})
	r.waitSent(dm, 1)
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "in the server", Mention: true})
	r.waitSent(c1, 1)
	r.stop()
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "are you back?"})
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hello?"})
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "chatter while down"})
	r.dc.Post(discordtest.Message{Author: ana, Guild: g1, Channel: c1, Content: "and you?", Mention: true})
	r.restart(nil)
	if sent := r.waitSent(dm, 3); !slices.Equal(contents(sent), []string{"re: hello", "re: are you back?", "re: hello?"}) {
		t.Fatalf("sent %q", contents(sent))
	}
	if sent := r.waitSent(c1, 2); !slices.Equal(contents(sent), []string{"re: in the server", "re: and you?"}) {
		t.Fatalf("sent %q in the server", contents(sent))
	}
	var after []string
	for _, c := range r.dc.Calls("GET", "/channels/"+dm+"/messages") {
		after = append(after, c.Query["after"])
	}
	if !slices.Contains(after, first) {
		t.Fatalf("the direct messages were read after %q, want after %s", after, first)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(r.env.Model.Requests()); n != 5 {
		t.Fatalf("%d turns, want 5", n)
	}
	// Read back again on the next start: nothing new, nothing twice.
	r.restart(nil)
	time.Sleep(200 * time.Millisecond)
	if n := len(r.env.Model.Requests()); n != 5 || len(r.dc.Sent(dm)) != 3 {
		t.Fatalf("%d turns and %d answers after another start", n, len(r.dc.Sent(dm)))
	}
}

// echoModel answers every message with "re: " and its text.
func echoModel(t testing.TB) *chattest.ModelServer {
	m := chattest.NewModelServer(t)
	m.Script = func(req goopenai.ChatCompletionRequest) chattest.Step {
		return chattest.Step{Text: "re: " + req.Messages[len(req.Messages)-1].Content}
	}
	return m
}

// The very first start does not answer a conversation's history.
func TestFirstStartDoesNotAnswerHistory(t *testing.T) {
	dc := discordtest.New(t)
	env := storetest.NewEnv(t, storetest.Options{})
	dm := dc.DM(ana.ID)
	dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "an old message"})
	a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	run(t, dc, a)
	dc.WaitFor(t, "the conversation read", func() bool { return len(dc.Calls("GET", "/channels/"+dm+"/messages")) > 0 })
	env.Model.Text("new")
	dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "a new one"})
	dc.WaitFor(t, "the answer", func() bool { return len(dc.Sent(dm)) == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := len(env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns, want only the new message's", n)
	}
}

// Answers are cut at 2,000 characters, code blocks closed and reopened
// so none is left open across two messages; the fake refuses longer.
func TestLongAnswersSplitWithCodeBlocksWhole(t *testing.T) {
	var code strings.Builder
	code.WriteString("Here it is:\n\n```go\n")
	for i := range 200 {
		code.WriteString("fmt.Println(\"line " + strings.Repeat("x", i%20) + "\")\n")
	}
	code.WriteString("```\n\nThat's all.")
	r := newRig(t, storetest.Options{}, nil)
	parts := r.a.Split(code.String())
	if len(parts) < 3 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, p := range parts {
		if n := len([]rune(p)); n > MaxMessage {
			t.Fatalf("part %d is %d characters", i, n)
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Fatalf("part %d leaves a code block open:\n%s", i, p)
		}
	}
	dm := r.dc.DM(ana.ID)
	r.env.Model.Text(code.String())
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "show me"})
	if sent := r.waitSent(dm, len(parts)); !slices.Equal(contents(sent), parts) {
		t.Fatalf("sent %d messages, want the %d parts", len(sent), len(parts))
	}
}

// A file larger than the download limit is refused though its message
// stated a small size: the download stops at the limit and nothing is
// kept. A file within it is kept.
func TestFileOverTheCapIsRefusedWhateverItsStatedSize(t *testing.T) {
	ws, err := files.New(files.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, storetest.Options{}, func(c *Config) { c.Files = ws })
	dm := r.dc.DM(ana.ID)
	r.env.Model.Text("ok")
	r.env.Model.Text("ok")
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "take this", Attachments: []discordtest.Attachment{
		{Name: "big.bin", ContentType: "application/octet-stream", Content: make([]byte, maxDownload+1), Size: 10}}})
	r.waitSent(dm, 1)
	if got := r.lastAsked(); !strings.Contains(got, "big.bin, but it could not be kept") {
		t.Fatalf("the model read %q", got)
	}
	if entries, _ := os.ReadDir(ws.Dir(chatKey("", dm))); len(entries) != 0 {
		t.Fatalf("the workspace holds %d files", len(entries))
	}
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Attachments: []discordtest.Attachment{
		{Name: "photo.png", ContentType: "image/png", Content: []byte("\x89PNG\r\n\x1a\nfake")}}})
	r.waitSent(dm, 2)
	if got := r.lastAsked(); !strings.Contains(got, "saved in this chat's workspace as photo.png") {
		t.Fatalf("the model read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir(chatKey("", dm)), "photo.png")); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("kept %q, %v", b, err)
	}
}

// A turn shows typing in its channel; a streamed answer is one message
// edited as it grows.
func TestTypingAndDrafts(t *testing.T) {
	r := newRig(t, storetest.Options{}, func(c *Config) { c.Stream = true })
	dm := r.dc.DM(ana.ID)
	r.env.Model.Push(chattest.Step{Chunks: []string{"Hello ", "streamed ", "world."}, ChunkDelay: 50 * time.Millisecond})
	r.dc.Post(discordtest.Message{Author: ana, Channel: dm, Content: "hi"})
	r.dc.WaitFor(t, "the final answer", func() bool {
		s := r.dc.Sent(dm)
		return len(s) == 1 && s[0].Content == "Hello streamed world."
	})
	if s := r.dc.Sent(dm)[0]; s.Edits == 0 {
		t.Fatal("the draft was never edited")
	}
	if r.dc.Typing(dm) == 0 {
		t.Fatal("no typing shown")
	}
}

// A token Discord rejects stops the start with a message naming
// discord.token; an unreachable gateway is retried with backoff while
// the channel sends.
func TestTokenRejectedAndGatewayUnreachable(t *testing.T) {
	t.Run("rejected", func(t *testing.T) {
		dc := discordtest.New(t)
		dc.RejectToken(true)
		env := storetest.NewEnv(t, storetest.Options{})
		a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
		ctx, cancel := context.WithTimeout(context.Background(), discordtest.Wait)
		defer cancel()
		err := a.Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "discord.token") || strings.Contains(err.Error(), discordtest.Token) {
			t.Fatalf("Run returned %v", err)
		}
	})
	t.Run("unreachable gateway", func(t *testing.T) {
		dc := discordtest.New(t)
		env := storetest.NewEnv(t, storetest.Options{})
		var waits atomic.Int32
		cfg := Config{Token: discordtest.Token, APIURL: dc.APIURL, GatewayURL: "ws://127.0.0.1:1/gateway", AllowedUsers: []string{ana.ID}}
		cfg.sleep = func(ctx context.Context, d time.Duration) error {
			waits.Add(1)
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
			}
			return ctx.Err()
		}
		a := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		dc.WaitFor(t, "retries", func() bool { return waits.Load() >= 3 })
		if !a.Ready() {
			t.Fatal("the channel does not send while the gateway is down")
		}
		if _, _, conns, _ := dc.Gateway(); conns != 0 {
			t.Fatalf("%d connections to the API's gateway, want gateway_url's", conns)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v", err)
		}
	})
	t.Run("gateway_url", func(t *testing.T) {
		dc := discordtest.New(t)
		env := storetest.NewEnv(t, storetest.Options{})
		a := New(Config{Token: discordtest.Token, APIURL: dc.APIURL, GatewayURL: dc.GatewayURL, AllowedUsers: []string{ana.ID}},
			bridge.NewRouter(env.Engine, "loadout"), env.Store)
		run(t, dc, a)
		if n := len(dc.Calls("GET", "/gateway")); n != 0 {
			t.Fatalf("the API was asked for the gateway %d times", n)
		}
	})
}

// The gateway is asked for what the channel needs: messages in servers
// and direct messages, with their content.
func TestIntents(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	_, _, _, intents := r.dc.Gateway()
	for _, want := range []discordgo.Intent{discordgo.IntentsGuildMessages, discordgo.IntentsDirectMessages, discordgo.IntentsMessageContent} {
		if discordgo.Intent(intents)&want == 0 {
			t.Fatalf("intents %b lack %b", intents, want)
		}
	}
}

// The declaration: its name, its Config's declared secrets, and a token
// that never reaches a log, alone or inside a URL, by its value or by
// its shape.
func TestKindAndRedaction(t *testing.T) {
	k := Kind()
	cfg := Config{Enabled: true, Token: discordtest.Token}
	if k.Name() != "discord" || !k.Enabled(cfg) || k.Enabled(Config{}) || k.Describe(cfg) != "discord (gateway)" {
		t.Fatalf("kind %q enabled=%v describe=%q", k.Name(), k.Enabled(cfg), k.Describe(cfg))
	}
	var buf bytes.Buffer
	log := logs.New(&buf, "info", "text", config.Secrets(cfg, nil), k.Shapes())
	log.Info("calling", "url", "https://discord.com/api/v9/webhooks/1/"+discordtest.Token+"/messages", "token", discordtest.Token)
	if strings.Contains(buf.String(), discordtest.Token) || !strings.Contains(buf.String(), "[REDACTED]") {
		t.Fatalf("logged %s", buf.String())
	}
	shapes := regexp.MustCompile(strings.Join(k.Shapes(), "|"))
	other := "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.Gh7xYz.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	for _, s := range []string{discordtest.Token, "GET https://proxy.example/bot/" + other + "/x", "Authorization: Bot " + other} {
		if out := shapes.ReplaceAllString(s, "[REDACTED]"); strings.Contains(out, discordtest.Token) || strings.Contains(out, other) {
			t.Fatalf("the shape missed the token in %q: %q", s, out)
		}
	}
	if shapes.MatchString("MTIzNDU2Nzg5.not.a-token and 123456789012345678") {
		t.Fatal("the shape takes what is no token")
	}
}

// Build makes no connection: a channel not run costs nothing.
func TestBuildDoesNoIO(t *testing.T) {
	dc := discordtest.New(t)
	env := storetest.NewEnv(t, storetest.Options{})
	cfg := Config{Enabled: true, Token: discordtest.Token, APIURL: dc.APIURL, AllowedUsers: []string{ana.ID}}
	before := runtime.NumGoroutine()
	ch, err := Kind().Build(context.Background(), cfg, bridge.Env{Router: bridge.NewRouter(env.Engine, "loadout"), Store: env.Store})
	if err != nil || ch.Name() != "discord" {
		t.Fatalf("built %v, %v", ch, err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(dc.Calls("GET", "/*")) + len(dc.Calls("GET", "/*/*")); n != 0 {
		t.Fatalf("%d requests before Run", n)
	}
	if _, _, conns, _ := dc.Gateway(); conns != 0 {
		t.Fatal("a gateway connection before Run")
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Build, %d before", n, before)
	}
}

// An interaction's token, a credential for 15 minutes, is kept out of
// the errors that reach the log.
func TestInteractionTokensLeaveErrors(t *testing.T) {
	const token = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDEyMzQ1Njc4OmFiY2RlZg"
	for _, err := range []error{
		&url.Error{Op: "Post", URL: "https://discord.com/api/v9/webhooks/100/" + token + "?wait=true", Err: errors.New("connection refused")},
		&discordgo.RateLimitError{RateLimit: &discordgo.RateLimit{TooManyRequests: &discordgo.TooManyRequests{RetryAfter: time.Second},
			URL: "https://discord.com/api/v9/interactions/200/" + token + "/callback"}},
	} {
		if got := scrub(err).Error(); strings.Contains(got, token) || !strings.Contains(got, "[token]") {
			t.Errorf("scrubbed %q", got)
		}
	}
	if scrub(nil) != nil {
		t.Error("scrub(nil) is an error")
	}
}

// Chat keys name the conversation the way Discord's links do.
func TestChatKeysAndRoutes(t *testing.T) {
	a := New(Config{Token: discordtest.Token}, nil, nil)
	for key, private := range map[string]bool{"discord:@me:123": true, "discord:" + g1 + ":" + t1: false} {
		if a.Private(key) != private {
			t.Errorf("Private(%q) = %v", key, !private)
		}
		raw, err := a.Route(key)
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := a.ReadRoute(raw)
		r := rt.(route)
		if chatKey(r.Guild, r.Channel) != key {
			t.Errorf("%q → %+v → %q", key, r, chatKey(r.Guild, r.Channel))
		}
	}
	for _, bad := range []string{"telegram:1", "discord:1", "discord::2", "discord:1:2:3"} {
		if _, err := a.Route(bad); err == nil {
			t.Errorf("Route(%q) took it", bad)
		}
	}
	if DefaultAPIURL != discordgo.EndpointAPI {
		t.Fatalf("DefaultAPIURL %q, discordgo speaks %q", DefaultAPIURL, discordgo.EndpointAPI)
	}
}

// Check names each bad key.
func TestCheck(t *testing.T) {
	ch := &config.Checker{Section: "discord"}
	Config{Token: "Bot " + discordtest.Token, AllowedUsers: []string{"ana"}, AllowedGuilds: []string{"x"},
		GatewayURL: "http://x", APIURL: "ftp://x", Workers: -1}.Check(ch)
	var got []string
	for _, err := range ch.Errors() {
		got = append(got, err.Error())
	}
	for _, key := range []string{"discord.token", "discord.allowed_users", "discord.allowed_guilds", "discord.gateway_url", "discord.api_url", "discord.workers"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, key+":") }) {
			t.Errorf("no error names %s: %q", key, got)
		}
	}
	ok := &config.Checker{Section: "discord"}
	Config{Token: discordtest.Token, AllowedUsers: []string{"42", "@bea"}, Guilds: []string{g1}}.Check(ok)
	if len(ok.Errors()) != 0 {
		t.Fatalf("a good section: %v", ok.Errors())
	}
}

// The sample config.yaml's discord section has every key of Config, and
// no other.
func TestSampleConfigHasEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sample []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimPrefix(line, "# ")
		switch {
		case strings.HasPrefix(line, "discord:"):
			in = true
		case in && strings.HasPrefix(line, "  ") && strings.Contains(line, ":"):
			key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			sample = append(sample, key)
		case in:
			in = false
		}
	}
	if want := config.Keys(Kind().ConfigType()); !sameSet(sample, want) {
		t.Fatalf("config.yaml's discord keys %q, Config's %q", sample, want)
	}
}

// An answer whose interaction expired (15 minutes) still reaches a
// direct message, in the conversation; in a server, where it was meant
// for the person alone, it is not posted for everyone.
func TestExpiredInteractionAnswers(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	dm := r.dc.DM(ana.ID)
	ctx := context.Background()
	private := route{Channel: dm, App: discordtest.AppID, Token: "itoken-gone"}
	if err := r.a.Send(ctx, private, "still here"); err != nil {
		t.Fatal(err)
	}
	if sent := r.dc.Sent(dm); len(sent) != 1 || sent[0].Content != "still here" || sent[0].Interaction != "" {
		t.Fatalf("sent %+v", sent)
	}
	shared := route{Channel: c1, Guild: g1, App: discordtest.AppID, Token: "itoken-gone", Ephemeral: true}
	if err := r.a.Send(ctx, shared, "for ana alone"); err == nil || len(r.dc.Sent(c1)) != 0 {
		t.Fatalf("Send returned %v; sent %q", err, contents(r.dc.Sent(c1)))
	}
}
