// Package webui is the chat in the browser: a channel like any other,
// for the people signed in to loadout's web side. The page at /chat
// sends each message through the channel's delivery pipeline (stored in
// the inbox before the request is answered, deduplicated by an id the
// page makes), and the answer streams back over Server-Sent Events:
// drafts while the model writes, then the parts, questions with Approve
// and Deny buttons, files to download and spoken answers. A person's
// chat key is "webui:" + their own user key ("webui:telegram:42") and
// each turn runs as that user key, so their memory, Google account and
// approvals are the same person's as in their other channel; the chat
// is theirs alone.
//
// What the page shows is kept in the store (one small record per chat,
// its latest events, and its working sign), so a page loaded again, or
// a stream that reconnects with Last-Event-ID, gets every part once.
// With several processes on one database, each tells the others of
// what it shows through the store's notices (bridge.Signals), so a page
// open on any of them streams the answers of all: no stickiness is
// needed.
package webui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"loadout/bridge"
	"loadout/chat"
)

// Name is the channel's name, its chat keys' prefix and its config
// section.
const Name = "webui"

// Config is the webui section.
type Config struct {
	// Delivery is what the process gives every channel.
	bridge.Delivery `yaml:"-"`
	// Enabled turns the chat in the browser on (webui.enabled); the web
	// side must be on too (ui.enabled).
	Enabled bool `yaml:"enabled"`
	// MaxUploadMB caps one message's files or voice recording, in MB
	// (webui.max_upload_mb); default 20. The files section's caps apply
	// too.
	MaxUploadMB int `yaml:"max_upload_mb"`
	// Whole sends each answer whole, without showing it while it is
	// written; default off (answers stream in).
	Whole bool `yaml:"-"`
	// KeepAlive is how often an idle stream gets a comment, so proxies
	// keep it open; default 20s.
	KeepAlive time.Duration `yaml:"-"`
}

// DefaultMaxUploadMB is webui.max_upload_mb's default.
const DefaultMaxUploadMB = 20

// Kind declares the browser chat to the program that runs it.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:     Name,
		SignedIn: true,
		Enabled:  func(c Config) bool { return c.Enabled },
		Describe: func(Config) string {
			return "webui (/chat)"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			if env.Web == nil {
				return nil, errors.New("config: webui.enabled needs the web side: set ui.enabled (and its sign-in) too, or turn webui.enabled off")
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store, env.Web), nil
		},
	})
}

// Chat is the browser chat channel.
type Chat struct {
	cfg    Config
	router *bridge.Router
	store  bridge.Store
	web    bridge.WebAuth
	pipe   *bridge.Pipeline
	log    *slog.Logger
	routes bridge.JSONRoute[route]
	rooms  *rooms
}

// route is where an answer goes: the person's user key.
type route struct {
	User string `json:"user"`
}

// New returns the channel: its answers go to the pages of the people
// web says are signed in; store keeps its inbox and what the pages show.
func New(cfg Config, router *bridge.Router, store bridge.Store, web bridge.WebAuth) *Chat {
	if cfg.MaxUploadMB <= 0 {
		cfg.MaxUploadMB = DefaultMaxUploadMB
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Chat{cfg: cfg, router: router, store: store, web: web, log: cfg.Logger.With("channel", Name),
		routes: bridge.JSONRoute[route]{Channel: Name}}
	signals, _ := store.(bridge.Signals)
	c.rooms = newRooms(store, signals, c.log)
	c.pipe = bridge.NewPipeline(cfg.Delivery.Pipeline(bridge.PipelineConfig{
		Channel: Name, Inbox: store, Handler: router, Outlet: c, Stream: !cfg.Whole, DraftEvery: draftEvery,
	}))
	return c
}

// draftEvery is how often a draft is sent to the page at most: a stream
// costs no platform's rate limit.
const draftEvery = 100 * time.Millisecond

var (
	_ bridge.Channel    = (*Chat)(nil)
	_ bridge.Readier    = (*Chat)(nil)
	_ bridge.Mounter    = (*Chat)(nil)
	_ bridge.FileSender = (*Chat)(nil)
	_ bridge.Asker      = (*Chat)(nil)
	_ bridge.Drafter    = (*Chat)(nil)
	_ bridge.Indicator  = (*Chat)(nil)
	_ bridge.Speaker    = (*Chat)(nil)
)

// Name is "webui".
func (c *Chat) Name() string { return Name }

// Pipeline is the channel's delivery pipeline.
func (c *Chat) Pipeline() *bridge.Pipeline { return c.pipe }

// Ready reports whether the channel takes messages and streams answers.
func (c *Chat) Ready() bool { return c.rooms.isOpen() }

// Run starts the pipeline, then serves until ctx ends: then the open
// streams end (the pages reconnect to the next process) and the
// pipeline stops.
func (c *Chat) Run(ctx context.Context) error {
	defer c.pipe.Stop()
	if err := c.pipe.Start(ctx); err != nil {
		return nil // ctx done
	}
	c.rooms.open()
	c.rooms.listen(ctx)
	<-ctx.Done()
	c.rooms.close()
	return nil
}

// ChatKey is the chat key of the person with userKey.
func ChatKey(userKey string) string { return Name + ":" + userKey }

// userOf is the person's user key of a chat key of this channel.
func userOf(chatKey string) (string, bool) {
	u, ok := strings.CutPrefix(chatKey, Name+":")
	return u, ok && u != ""
}

// Route is the reply address of a chat: its person's user key.
func (c *Chat) Route(chatKey string) ([]byte, error) {
	u, ok := userOf(chatKey)
	if !ok {
		return nil, fmt.Errorf("webui: %q is not a chat of the browser channel", chatKey)
	}
	return c.routes.Encode(route{User: u}), nil
}

// Private: every browser chat is one person's.
func (c *Chat) Private(chatKey string) bool {
	_, ok := userOf(chatKey)
	return ok
}

// ReadRoute reads a route the inbox keeps.
func (c *Chat) ReadRoute(raw []byte) (any, error) { return c.routes.Read(raw) }

func (c *Chat) chatOf(r any) (string, error) {
	rt, err := c.routes.Of(r)
	if err != nil {
		return "", err
	}
	if rt.User == "" {
		return "", errors.New("webui: a route without a person")
	}
	return ChatKey(rt.User), nil
}

// Split keeps an answer whole: a page has no message size.
func (c *Chat) Split(text string) []string { return []string{text} }

// Send shows one part of an answer.
func (c *Chat) Send(ctx context.Context, r any, part string) error {
	key, err := c.chatOf(r)
	if err != nil {
		return err
	}
	return c.rooms.append(ctx, key, event{Kind: kindAnswer, Text: part})
}

// Ask shows a question with Approve and Deny buttons, and Always allow
// where it is offered, labelled with its code. The buttons are only ever
// on the asker's own page; the press is checked again (Answerable)
// before it is taken.
func (c *Chat) Ask(ctx context.Context, r any, part string, q bridge.Question, _ string) error {
	key, err := c.chatOf(r)
	if err != nil {
		return err
	}
	return c.rooms.append(ctx, key, event{Kind: kindAsk, Text: part + bridge.AskLine(q), Approval: q.ID, Code: chat.CodeOf(q.ID), Always: q.Always})
}

// Draft shows the answer so far; the page replaces the text it shows.
func (c *Chat) Draft(ctx context.Context, r any, draft []byte, text string) ([]byte, error) {
	key, err := c.chatOf(r)
	if err != nil {
		return nil, err
	}
	ref := string(draft)
	if ref == "" {
		ref = newID()
	}
	c.rooms.draft(ctx, key, ref, text)
	return []byte(ref), nil
}

// Replace turns the draft into the answer's first part.
func (c *Chat) Replace(ctx context.Context, r any, draft []byte, part string) error {
	key, err := c.chatOf(r)
	if err != nil {
		return err
	}
	if err := c.rooms.append(ctx, key, event{Kind: kindAnswer, Text: part, Replaces: string(draft)}); err != nil {
		return err
	}
	c.rooms.undraft(key, string(draft))
	return nil
}

// Working shows that an answer is on its way until stop.
func (c *Chat) Working(ctx context.Context, r any) (stop func()) {
	key, err := c.chatOf(r)
	if err != nil {
		return func() {}
	}
	c.rooms.working(ctx, key, true)
	var once sync.Once
	return func() { once.Do(func() { c.rooms.working(context.WithoutCancel(ctx), key, false) }) }
}

// SendFile offers a file to download from the chat's page. The file is
// the chat's: one already in the chat's files is offered as it is, any
// other is copied there first.
func (c *Chat) SendFile(ctx context.Context, r any, name string, f *os.File) error {
	key, err := c.chatOf(r)
	if err != nil {
		return err
	}
	saved, err := c.keep(ctx, key, name, f)
	if err != nil {
		return err
	}
	return c.rooms.append(ctx, key, event{Kind: kindFile, Name: name, File: saved})
}

// FileOpener is what the channel needs of the chats' files besides
// saving to offer them for download: tools/files.Workspaces is one.
type FileOpener interface {
	Open(chatKey, name string) (*os.File, error)
}

// keep is the name in the chat's files under which f is offered.
func (c *Chat) keep(ctx context.Context, key, name string, f *os.File) (string, error) {
	op, ok := c.cfg.Files.(FileOpener)
	if c.cfg.Files == nil || !ok {
		return "", errors.New("webui: files are not kept in this setup, so none can be offered")
	}
	if have, err := op.Open(key, name); err == nil {
		a, aerr := have.Stat()
		b, berr := f.Stat()
		have.Close()
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			return name, nil
		}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return "", fmt.Errorf("webui: read %s: %w", name, err)
	}
	saved, _, err := c.cfg.Files.Save(ctx, key, name, f)
	if err != nil {
		return "", fmt.Errorf("webui: keep %s in the chat's files: %w", name, err)
	}
	return saved, nil
}

// SendVoice keeps a spoken answer in the chat's files and plays it on
// the page.
func (c *Chat) SendVoice(ctx context.Context, r any, audio []byte) error {
	key, err := c.chatOf(r)
	if err != nil {
		return err
	}
	if c.cfg.Files == nil {
		return errors.New("webui: files are not kept in this setup, so a spoken answer cannot be offered")
	}
	saved, _, err := c.cfg.Files.Save(ctx, key, "spoken-answer.ogg", bytes.NewReader(audio))
	if err != nil {
		return fmt.Errorf("webui: keep the spoken answer: %w", err)
	}
	return c.rooms.append(ctx, key, event{Kind: kindVoice, File: saved})
}
