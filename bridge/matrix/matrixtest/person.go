package matrixtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Person is someone who talks to the bot: a mautrix client of their own
// on a new device, syncing in the background, which records what others
// say in its rooms (decrypted, in encrypted rooms).
type Person struct {
	Client *mautrix.Client
	// Encrypts: the person's device has end-to-end encryption.
	Encrypts bool

	// crypto is the device's crypto helper, in a build with encryption.
	crypto any
	tr     *personTransport

	mu     sync.Mutex
	events map[id.RoomID][]*event.Event
	seen   map[id.EventID]bool
	synced bool
}

// Encryption reports whether this build can encrypt (the goolm tag).
func Encryption() bool { return encryption }

// Person logs localpart in on a new device (making the account first if
// needed), with encryption when encrypted, and syncs until the test
// ends.
func (s *Server) Person(t testing.TB, localpart string, encrypted bool) *Person {
	t.Helper()
	if encrypted && !encryption {
		t.Skip("end-to-end encryption needs the goolm build tag (go test -tags sqlite_fts5,goolm)")
	}
	password := "pw-" + localpart + "-secret"
	uid := s.Account(t, localpart, password)
	cli, err := mautrix.NewClient(s.URL, id.UserID(uid), "")
	if err != nil {
		t.Fatal(err)
	}
	cli.Log = zerolog.Nop()
	tr := &personTransport{}
	cli.Client = &http.Client{Transport: tr}
	ctx := context.Background()
	if _, err := cli.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypePassword, StoreCredentials: true,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: localpart}, Password: password}); err != nil {
		t.Fatalf("login %s: %v", localpart, err)
	}
	p := &Person{Client: cli, Encrypts: encrypted, events: map[id.RoomID][]*event.Event{}, seen: map[id.EventID]bool{}, tr: tr}
	syncer := mautrix.NewDefaultSyncer()
	cli.Syncer = syncer
	if encrypted {
		if p.crypto, err = startCrypto(ctx, cli, filepath.Join(t.TempDir(), localpart+"-crypto.db")); err != nil {
			t.Fatalf("%s's encryption: %v", localpart, err)
		}
	} else {
		cli.StateStore = mautrix.NewMemoryStateStore()
		syncer.OnEvent(cli.StateStoreSyncHandler)
	}
	record := func(_ context.Context, evt *event.Event) {
		if evt.Sender == cli.UserID {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.seen[evt.ID] {
			return // a client shows an event once
		}
		p.seen[evt.ID] = true
		p.events[evt.RoomID] = append(p.events[evt.RoomID], evt)
	}
	syncer.OnEventType(event.EventMessage, record)
	syncer.OnEventType(event.EventReaction, record)
	syncer.OnSync(func(context.Context, *mautrix.RespSync, string) bool {
		p.mu.Lock()
		p.synced = true
		p.mu.Unlock()
		return true
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Short polls: a homeserver that misses waking a long poll
		// delays nothing long.
		for ctx.Err() == nil {
			since, _ := cli.Store.LoadNextBatch(ctx, cli.UserID)
			res, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: 1000})
			if err == nil {
				err = cli.Syncer.ProcessResponse(ctx, res, since)
			}
			if err == nil {
				err = cli.Store.SaveNextBatch(ctx, cli.UserID, res.NextBatch)
			}
			if err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	Eventually(t, localpart+"'s first sync", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.synced
	})
	return p
}

// ID is the person's user id.
func (p *Person) ID() id.UserID { return p.Client.UserID }

// Room makes a room of the person's, encrypted or not, and invites
// others to it: a direct chat when others is one user.
func (p *Person) Room(t testing.TB, encrypted bool, others ...id.UserID) id.RoomID {
	t.Helper()
	req := &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: others, IsDirect: len(others) == 1}
	if encrypted {
		req.InitialState = []*event.Event{{Type: event.StateEncryption, Content: event.Content{
			Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}
	}
	res, err := p.Client.CreateRoom(context.Background(), req)
	if err != nil {
		t.Fatalf("create a room: %v", err)
	}
	if encrypted {
		Eventually(t, "the room known as encrypted", func() bool {
			ok, _ := p.Client.StateStore.IsEncrypted(context.Background(), res.RoomID)
			return ok
		})
	}
	return res.RoomID
}

// WaitJoined waits until user has joined room, as the homeserver and,
// with encryption, the person's client (which shares its keys with the
// members it knows) see it.
func (p *Person) WaitJoined(t testing.TB, room id.RoomID, user id.UserID) {
	t.Helper()
	Eventually(t, string(user)+" to join", func() bool {
		res, err := p.Client.JoinedMembers(context.Background(), room)
		if err != nil {
			return false
		}
		if _, ok := res.Joined[user]; !ok {
			return false
		}
		return !p.Encrypts || p.Client.StateStore.IsMembership(context.Background(), room, user, event.MembershipJoin)
	})
}

// Say sends text to room (encrypted where the room is) and returns the
// event's id.
func (p *Person) Say(t testing.TB, room id.RoomID, c *event.MessageEventContent) id.EventID {
	t.Helper()
	res, err := p.Client.SendMessageEvent(context.Background(), room, event.EventMessage, c)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return res.EventID
}

// Events are the events others sent to room that the person has seen,
// in order: messages (decrypted) and reactions.
func (p *Person) Events(room id.RoomID) []*event.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*event.Event(nil), p.events[room]...)
}

// Texts are the messages from sender in room as the person reads them:
// each message's body, an edit replacing the body of what it edits.
func (p *Person) Texts(room id.RoomID, sender id.UserID) []string {
	var out []string
	index := map[id.EventID]int{}
	for _, evt := range p.Events(room) {
		c := evt.Content.AsMessage()
		if evt.Sender != sender || evt.Type != event.EventMessage || c == nil {
			continue
		}
		if orig := c.RelatesTo.GetReplaceID(); orig != "" {
			if i, ok := index[orig]; ok && c.NewContent != nil {
				out[i] = c.NewContent.Body
			}
			continue
		}
		index[evt.ID] = len(out)
		out = append(out, c.Body)
	}
	return out
}

// Download fetches a file a message shares, decrypting an encrypted one.
func (p *Person) Download(c *event.MessageEventContent) ([]byte, error) {
	url := c.URL
	if c.File != nil {
		url = c.File.URL
	}
	uri, err := url.Parse()
	if err != nil {
		return nil, err
	}
	resp, err := p.Client.Download(context.Background(), uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if c.File != nil {
		if err := c.File.DecryptInPlace(data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// Eventually waits up to 20s for cond, failing t with what.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KeepKeys keeps the device's to-device messages (room keys, answers to
// key requests) back while on: others cannot read what it says.
func (p *Person) KeepKeys(on bool) { p.tr.withhold(on) }

// personTransport is a person's way to the homeserver, which can keep
// the device's to-device messages (room keys) back and send them later,
// as a slow network would.
type personTransport struct {
	mu   sync.Mutex
	hold bool
	kept []*http.Request
}

func (tr *personTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	hold := tr.hold && strings.Contains(r.URL.Path, "/sendToDevice/")
	if hold {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			tr.mu.Unlock()
			return nil, err
		}
		later := r.Clone(context.Background())
		later.Body = io.NopCloser(bytes.NewReader(body))
		later.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		tr.kept = append(tr.kept, later)
	}
	tr.mu.Unlock()
	if hold {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// withhold keeps the to-device messages sent while on.
func (tr *personTransport) withhold(on bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.hold = on
}

// sendKept sends the kept to-device messages.
func (tr *personTransport) sendKept() error {
	tr.mu.Lock()
	kept := tr.kept
	tr.kept = nil
	tr.mu.Unlock()
	for _, r := range kept {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New("sendToDevice: " + resp.Status)
		}
	}
	return nil
}
