package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"loadout/bridge"
)

// Notices among the processes that share the store (bridge.Signals). A
// notice goes to this handle's listeners at once, through a table of
// them; on PostgreSQL it goes to the other processes by NOTIFY on one
// channel per schema, on which a connection of each process, made at
// the first Listen and made again whenever it breaks, LISTENs. SQLite
// serves one process: its notices stay in it.
//
// Any role that can connect to the database may NOTIFY on any channel:
// a notice is signed with a key kept in the schema (noticeKey), which
// such a role cannot read without being granted loadout's tables, and
// one whose signature does not hold is dropped.

var _ bridge.Signals = (*DB)(nil)

// signals is a handle's listeners, and on PostgreSQL its listening
// connection.
type signals struct {
	// mark is on every notice this handle sends: its own come back to it
	// through PostgreSQL, and are skipped (it has delivered them).
	mark string
	// dsn and channel are PostgreSQL's; dsn is "" on SQLite. key signs
	// the notices sent through PostgreSQL.
	dsn, channel string
	key          []byte

	mu        sync.Mutex
	subs      map[string]map[*signalSub]struct{}
	listening bool
	stop      context.CancelFunc
	done      chan struct{}

	// deliver hands out one notice at a time.
	deliver sync.Mutex
}

type signalSub struct {
	ctx context.Context
	f   func(string)
}

// Timing of the listening connection.
const (
	// listenIdle is how long it waits for a notice before it checks
	// that the connection still answers.
	listenIdle = 30 * time.Second
	// relistenMax bounds the wait between attempts to make it again.
	relistenMax = 5 * time.Second
)

func newSignals(dsn, channel string, key []byte) *signals {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &signals{mark: hex.EncodeToString(b[:]), dsn: dsn, channel: channel, key: key, subs: map[string]map[*signalSub]struct{}{}}
}

// noticeKeyName names, among the states, the key that signs notices.
const noticeKeyName = "store:notice-key"

// noticeKey is the schema's key for signing notices, made by the first
// process that asks.
func noticeKey(g *gorm.DB) ([]byte, error) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	err := g.Clauses(clause.OnConflict{DoNothing: true}).Create(&state{Key: noticeKeyName, Value: hex.EncodeToString(b[:]), UpdatedAt: utcNow()}).Error
	if err != nil {
		return nil, err
	}
	var kept state
	if err := g.Where("key = ?", noticeKeyName).Take(&kept).Error; err != nil {
		return nil, err
	}
	return hex.DecodeString(kept.Value)
}

// sign is the signature of a notice's text: the first 16 bytes of its
// HMAC-SHA256, in hex.
func (s *signals) sign(text string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(s.channel + "\x00" + text))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// noticeChannel is the NOTIFY channel of the schema: a name of at most
// 63 bytes, PostgreSQL's limit.
func noticeChannel(schema string) string {
	name := "loadout_" + schema
	if len(name) > 63 {
		h := fnv.New64a()
		h.Write([]byte(schema))
		name = fmt.Sprintf("loadout_%x", h.Sum64())
	}
	return name
}

// Signal delivers payload to this process's listeners of topic and, on
// PostgreSQL, to the other processes'.
func (d *DB) Signal(ctx context.Context, topic, payload string) error {
	if payload == "" || len(payload) > bridge.MaxSignal || topic == "" || strings.Contains(topic, " ") {
		return fmt.Errorf("store: a notice of %q must have a payload of 1 to %d bytes", topic, bridge.MaxSignal)
	}
	d.sig.send(topic, payload)
	if d.sig.dsn == "" {
		return nil
	}
	text := d.sig.mark + " " + topic + " " + payload
	return kind(d.db.WithContext(ctx).Exec("SELECT pg_notify(?, ?)", d.sig.channel, d.sig.sign(text)+" "+text).Error)
}

// Listen calls f with topic's notices until ctx ends.
func (d *DB) Listen(ctx context.Context, topic string, f func(payload string)) {
	s := d.sig
	sub := &signalSub{ctx: ctx, f: f}
	s.mu.Lock()
	if s.subs[topic] == nil {
		s.subs[topic] = map[*signalSub]struct{}{}
	}
	s.subs[topic][sub] = struct{}{}
	if s.dsn != "" && !s.listening {
		s.listening = true
		lctx, stop := context.WithCancel(context.Background())
		s.stop, s.done = stop, make(chan struct{})
		go s.listen(lctx)
	}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.subs[topic], sub)
		if len(s.subs[topic]) == 0 {
			delete(s.subs, topic)
		}
		s.mu.Unlock()
	})
}

// send calls topic's listeners with payload; "" for topic calls every
// listener (notices may have been lost).
func (s *signals) send(topic, payload string) {
	s.deliver.Lock()
	defer s.deliver.Unlock()
	s.mu.Lock()
	var fs []func(string)
	for t, subs := range s.subs {
		if t == topic || topic == "" {
			for sub := range subs {
				if sub.ctx.Err() == nil {
					fs = append(fs, sub.f)
				}
			}
		}
	}
	s.mu.Unlock()
	for _, f := range fs {
		f(payload)
	}
}

// close stops the listening connection, if there is one.
func (s *signals) close() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// listen keeps a connection LISTENing until ctx ends, making it again
// when it breaks; each time it is made, the listeners are told that
// notices may have been lost.
func (s *signals) listen(ctx context.Context) {
	defer close(s.done)
	wait := 100 * time.Millisecond
	for {
		conn, err := pgx.Connect(ctx, s.dsn)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize())
			if err == nil {
				wait = 100 * time.Millisecond
				s.send("", "")
				err = s.receive(ctx, conn)
			}
			conn.Close(context.WithoutCancel(ctx))
		}
		if ctx.Err() != nil {
			return
		}
		_ = err // the listeners read the store meanwhile
		s.send("", "")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, relistenMax)
	}
}

// receive hands out the notices conn receives until it breaks or ctx
// ends.
func (s *signals) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && (pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)):
			if err := conn.Ping(ctx); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		sig, text, _ := strings.Cut(n.Payload, " ")
		if !hmac.Equal([]byte(sig), []byte(s.sign(text))) {
			continue // not a process of this store's
		}
		mark, rest, _ := strings.Cut(text, " ")
		topic, payload, _ := strings.Cut(rest, " ")
		if mark != s.mark && payload != "" {
			s.send(topic, payload)
		}
	}
}
