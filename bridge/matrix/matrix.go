// Package matrix is the Matrix channel: direct messages, and rooms where
// the bot is mentioned, reach the shared command layer and engine through
// the delivery pipeline, over the client-server API of one homeserver,
// with end-to-end encryption (mautrix's crypto in pure Go, its state in
// loadout's database).
package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"

	"loadout/backoff"
	"loadout/bridge"
)

// Config configures an Adapter. Zero values are the documented defaults.
type Config struct {
	// Delivery is what the process gives every channel: files, voice,
	// the journal, the shutdown grace, logging and metrics.
	bridge.Delivery `yaml:"-"`
	// Enabled runs the channel in loadout serve (matrix.enabled).
	Enabled bool `yaml:"enabled"`
	// HomeserverURL is the client-server API of the bot's homeserver
	// ("https://matrix.example.org"), the only address the channel
	// contacts.
	HomeserverURL string `yaml:"homeserver_url" secret:"url"`
	// UserID is the bot's account ("@loadout:example.org").
	UserID string `yaml:"user_id"`
	// AccessToken is the bot's access token. Without it, Password logs
	// in once, and the token and device it gets are kept in the
	// database.
	AccessToken string `yaml:"access_token" secret:"true"`
	// Password is the bot's password: used to log in when there is no
	// token, and to publish the bot's cross-signing keys, which the
	// homeserver may ask it for.
	Password string `yaml:"password" secret:"true"`
	// PickleKey is the key the bot device's encryption state (its olm
	// account and sessions, its room keys) is kept under in the
	// database: at least 32 characters, the same in every process
	// sharing the database. A build with encryption requires it.
	PickleKey string `yaml:"pickle_key" secret:"true"`
	// AllowedUsers may use the bot: Matrix ids ("@ana:example.org").
	// Nobody else may; their invites are rejected.
	AllowedUsers []string `yaml:"allowed_users"`
	// DeviceName names the bot's device in people's clients; default
	// "loadout".
	DeviceName string `yaml:"device_name"`
	// Workers is the number of turns run at once; default 8.
	Workers int `yaml:"workers"`
	// Stream shows an answer while the model writes it: one message,
	// edited as the text grows, then replaced by the answer. Default off.
	Stream bool `yaml:"stream"`
	// ChunkSize is the longest message sent, in characters; default 4000.
	ChunkSize int `yaml:"chunk_size"`
	// SyncTimeout is how long one /sync waits for events; default 30s.
	SyncTimeout time.Duration `yaml:"sync_timeout"`
	// KeyWait is how long an encrypted message whose keys have not
	// arrived is kept and tried again before its sender is told it could
	// not be read; default 10m.
	KeyWait time.Duration `yaml:"key_wait"`
	// MaxBackoff caps the wait between tries after the homeserver
	// failed; default 1m.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// MaxFile is the largest file a person sends that is downloaded, in
	// bytes, whatever size its message states; default 50 MB.
	MaxFile int64 `yaml:"max_file"`
}

// Kind declares the Matrix channel to the program that runs it.
func Kind() bridge.Kind {
	return bridge.Declare(bridge.Declaration[Config]{
		Name:    "matrix",
		Enabled: func(c Config) bool { return c.Enabled },
		Allowed: func(c Config) []string { return c.AllowedUsers },
		Shapes:  TokenShapes(),
		Describe: func(c Config) string {
			return "matrix (" + c.UserID + ")"
		},
		Build: func(_ context.Context, c Config, env bridge.Env) (bridge.Channel, error) {
			if env.SQL == nil || env.SQL.DB == nil {
				return nil, errors.New("matrix: the channel keeps its encryption keys in the database, and none was given")
			}
			c.Delivery = env.Delivery
			return New(c, env.Router, env.Store, *env.SQL)
		},
	})
}

// TokenShapes are the forms of Matrix access tokens, redacted wherever
// they appear: Synapse's (syt_…), and Dendrite's, 43 characters of
// unpadded URL-safe base64 standing alone (an event id, the same
// characters after a $, is not one).
func TokenShapes() []string {
	return []string{`syt_[A-Za-z0-9_]+`, `(?:^|[^$\w-])[\w-]{43}(?:[^\w-]|$)`}
}

// Adapter connects one Matrix account to a router. Create it with New and
// start it with Run.
type Adapter struct {
	cfg    Config
	router *bridge.Router
	pipe   *bridge.Pipeline
	store  bridge.Store
	db     *dbutil.Database
	states *sqlstatestore.SQLStateStore
	cli    *mautrix.Client
	allow  *bridge.Allowlist
	log    *slog.Logger
	// e2e is end-to-end encryption once Run started it; nil in a build
	// without it.
	e2e e2ee
	// crypto keeps the encryption state to one user at a time.
	crypto *cryptoLock

	mu      sync.Mutex
	ready   bool
	started bool // the pipeline
	// typing counts the turns shown as typing in each room.
	typing map[id.RoomID]int
	// kept are encrypted events waiting for their keys.
	kept *keptEvents
}

// New returns an adapter for the account cfg names that answers through
// router, keeps its inbox and small states in st, and its encryption
// keys and room states in db. It does no I/O: Run connects.
func New(cfg Config, router *bridge.Router, st bridge.Store, db bridge.SQL) (*Adapter, error) {
	if cfg.DeviceName == "" {
		cfg.DeviceName = "loadout"
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 4000
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = 30 * time.Second
	}
	if cfg.KeyWait <= 0 {
		cfg.KeyWait = 10 * time.Minute
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.MaxFile <= 0 {
		cfg.MaxFile = 50 << 20
	}
	cfg.Delivery.Fill(&http.Client{})
	cli, err := mautrix.NewClient(cfg.HomeserverURL, id.UserID(cfg.UserID), "")
	if err != nil {
		return nil, fmt.Errorf("matrix.homeserver_url: %w", err)
	}
	cli.Client = cfg.HTTPClient
	cli.Log = zerolog.Nop()
	cli.DefaultHTTPRetries = 4
	cli.DefaultHTTPBackoff = time.Second
	dialect := db.Dialect
	if dialect == "" {
		dialect = "sqlite"
	}
	sdb, err := dbutil.NewWithDB(db.DB, dialect)
	if err != nil {
		return nil, fmt.Errorf("matrix: the database: %w", err)
	}
	states := sqlstatestore.NewSQLStateStore(sdb, dbutil.NoopLogger, false)
	cli.StateStore = states
	sy := newSyncer()
	sy.OnEvent(cli.StateStoreSyncHandler)
	cli.Syncer = sy
	log := cfg.Logger.With("channel", "matrix")
	a := &Adapter{
		cfg: cfg, router: router, store: st, db: sdb, states: states, cli: cli,
		allow: bridge.NewAllowlist(cfg.AllowedUsers), log: log,
		typing: map[id.RoomID]int{}, kept: &keptEvents{}, crypto: newCryptoLock(cfg.Claim, log),
	}
	d := cfg.Delivery
	d.Logger = log
	a.pipe = bridge.NewPipeline(d.Pipeline(bridge.PipelineConfig{
		Channel: "matrix", Inbox: st, Handler: router, Outlet: a, Workers: cfg.Workers, Stream: cfg.Stream,
	}))
	return a, nil
}

// Keys of the channel's small states.
const (
	stateToken     = "matrix:access_token"
	stateDevice    = "matrix:device_id"
	stateNextBatch = "matrix:next_batch"
	// statePickle: the pickle key earlier versions made and kept here;
	// moved to matrix.pickle_key at the first start with it.
	statePickle    = "matrix:pickle_key"
	stateKept      = "matrix:undecrypted"
	stateCrossSign = "matrix:cross_signing"
	stateAskPrefix = "matrix:ask:"
	// stateSentPrefix + room: the transactions of the bot's last parts
	// there that the homeserver took.
	stateSentPrefix = "matrix:sent:"
)

// Run logs in, sets up encryption, resumes messages left unfinished
// before a restart, and syncs until ctx is cancelled; then it stops
// intake and lets in-flight turns finish for ShutdownGrace. It returns
// nil after a cancel, and an error when the homeserver refuses the
// account's credentials or its encryption state cannot be set up.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.pipe.Stop()
	if err := a.login(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.allow.Len() == 0 {
		a.log.Warn("matrix.allowed_users is empty: everybody is refused")
	}
	if err := a.setUp(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.cfg.Exclusive != nil {
		// Replicas share the inbox: each runs a pipeline whether or not
		// it is the one that syncs.
		if err := a.startPipeline(ctx); err != nil {
			return nil // ctx done
		}
		a.mu.Lock()
		a.ready = true
		a.mu.Unlock()
	}
	// Alone, the sync loop starts the pipeline after its first sync.
	err := a.cfg.Exclusive.Do(ctx, syncDuty, a.syncLoop)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// syncDuty names the lease of the sync, which one process of those
// sharing the database holds.
const syncDuty = "matrix sync"

// patient retries what the homeserver failed, waiting up to MaxBackoff,
// until ctx ends or the error is final.
func (a *Adapter) patient() backoff.Policy {
	return backoff.Policy{Max: a.cfg.MaxBackoff, Jitter: 0.2, OnRetry: func(err error, wait time.Duration) {
		a.cfg.Observer.Retried("matrix")
		a.log.Warn("matrix: the homeserver failed; retrying", "err", err, "wait", wait)
	}}
}

// final classifies a homeserver error: what the homeserver refused for
// good (a bad token, a forbidden call) is not retried.
func final(err error) (bool, time.Duration) {
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.RespError != nil {
		switch he.RespError.ErrCode {
		case mautrix.MUnknownToken.ErrCode, mautrix.MMissingToken.ErrCode, mautrix.MForbidden.ErrCode, mautrix.MUserDeactivated.ErrCode:
			return false, 0
		case mautrix.MLimitExceeded.ErrCode:
			if ms, ok := he.RespError.ExtraData["retry_after_ms"].(float64); ok {
				return true, time.Duration(ms) * time.Millisecond
			}
		}
	}
	if errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken) || errors.Is(err, mautrix.MForbidden) {
		return false, 0
	}
	return true, 0
}

// login finds the bot's token and device: matrix.access_token; else the
// one a password login kept; else a password login now, kept for the
// next start. An unreachable homeserver is waited for.
func (a *Adapter) login(ctx context.Context) error {
	token := a.cfg.AccessToken
	from := "matrix.access_token"
	if token == "" {
		kept, err := a.store.State(ctx, stateToken)
		if err != nil {
			return fmt.Errorf("matrix: read the kept access token: %w", err)
		}
		token, from = kept, "the access token kept from the last password login"
	}
	if token != "" {
		err := a.whoami(ctx, token)
		if err == nil {
			return nil
		}
		if a.cfg.AccessToken != "" || a.cfg.Password == "" || !unknownToken(err) {
			return fmt.Errorf("%s was not accepted by %s: %w", from, a.cfg.HomeserverURL, err)
		}
		a.log.Warn("matrix: the kept access token is no longer valid; logging in with matrix.password again")
	}
	if a.cfg.Password == "" {
		return errors.New("matrix: set matrix.access_token, or matrix.password to log in")
	}
	device, err := a.store.State(ctx, stateDevice)
	if err != nil {
		return fmt.Errorf("matrix: read the kept device: %w", err)
	}
	var res *mautrix.RespLogin
	err = a.patient().Do(ctx, final, func(ctx context.Context) error {
		res, err = a.cli.Login(ctx, &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypePassword,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.cfg.UserID},
			Password:                 a.cfg.Password,
			DeviceID:                 id.DeviceID(device),
			InitialDeviceDisplayName: a.cfg.DeviceName,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("matrix.password was not accepted by %s for %s: %w", a.cfg.HomeserverURL, a.cfg.UserID, err)
	}
	if err := a.store.SetState(ctx, stateToken, res.AccessToken); err != nil {
		return fmt.Errorf("matrix: keep the access token: %w", err)
	}
	if err := a.store.SetState(ctx, stateDevice, string(res.DeviceID)); err != nil {
		return fmt.Errorf("matrix: keep the device id: %w", err)
	}
	a.cli.AccessToken, a.cli.UserID, a.cli.DeviceID = res.AccessToken, res.UserID, res.DeviceID
	a.log.Info("matrix: logged in with matrix.password; the token is kept in the database", "user", res.UserID, "device", res.DeviceID)
	return nil
}

func unknownToken(err error) bool {
	return errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken)
}

// whoami checks token and learns the account and device it is for.
func (a *Adapter) whoami(ctx context.Context, token string) error {
	a.cli.AccessToken = token
	var res *mautrix.RespWhoami
	err := a.patient().Do(ctx, final, func(ctx context.Context) error {
		var err error
		res, err = a.cli.Whoami(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if a.cfg.UserID != "" && res.UserID != id.UserID(a.cfg.UserID) {
		return fmt.Errorf("the token is %s's, not matrix.user_id %s", res.UserID, a.cfg.UserID)
	}
	if res.DeviceID == "" {
		return errors.New("the homeserver did not say which device the token is for")
	}
	a.cli.UserID, a.cli.DeviceID = res.UserID, res.DeviceID
	a.log.Info("matrix connected", "user", res.UserID, "device", res.DeviceID)
	return nil
}

// setUp brings the room state tables to this build's and starts
// end-to-end encryption.
func (a *Adapter) setUp(ctx context.Context) error {
	// dbutil looks for its version tables in every schema of a
	// PostgreSQL database; made first in the one loadout uses, they are
	// found there, and so are the tables they version.
	for _, t := range []string{sqlstatestore.VersionTableName, cryptoVersionTable} {
		if _, err := a.db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t+" (version INTEGER, compat INTEGER)"); err != nil {
			return fmt.Errorf("matrix: set up %s: %w", t, err)
		}
	}
	if err := a.states.Upgrade(ctx); err != nil {
		return fmt.Errorf("matrix: set up the room state tables: %w", err)
	}
	e, err := startE2EE(ctx, a)
	if err != nil {
		return fmt.Errorf("matrix: end-to-end encryption: %w", err)
	}
	a.e2e = e
	return nil
}

// startPipeline starts the pipeline, once.
func (a *Adapter) startPipeline(ctx context.Context) error {
	a.mu.Lock()
	started := a.started
	a.mu.Unlock()
	if started {
		return nil
	}
	if err := a.pipe.Start(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	return nil
}

// cryptoVersionTable versions the crypto_ tables (mautrix's
// crypto/sql_store_upgrade.VersionTableName, which only a build with
// encryption may import).
const cryptoVersionTable = "crypto_version"

// Ready reports whether the adapter is logged in, has set up its
// encryption and answers: alone, once it has synced; among processes
// sharing the database, once its pipeline runs, whichever of them
// syncs.
func (a *Adapter) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

func (a *Adapter) self() id.UserID { return a.cli.UserID }

// route is where an answer goes; the pipeline stores it, as JSON, with
// the event.
type route struct {
	Room id.RoomID `json:"room"`
	// Thread is the root of the thread the answer goes to; "" for the
	// room's main timeline.
	Thread id.EventID `json:"thread,omitempty"`
	// Event is the person's message, which the answer replies to.
	Event id.EventID `json:"event,omitempty"`
}

// ReadRoute reads a route the inbox keeps.
func (a *Adapter) ReadRoute(raw []byte) (any, error) {
	var r route
	if err := json.Unmarshal(raw, &r); err != nil || r.Room == "" {
		return nil, fmt.Errorf("matrix: unreadable route %q: %v", raw, err)
	}
	return r, nil
}

func asRoute(rt any) (route, error) {
	r, ok := rt.(route)
	if !ok {
		return route{}, fmt.Errorf("matrix: %T is not a Matrix route", rt)
	}
	return r, nil
}

func (r route) encode() []byte {
	b, _ := json.Marshal(r) // strings always encode
	return b
}

// chatKey is the chat of a room's main timeline, or of one thread:
// "matrix:<room id>" or "matrix:<room id>/<thread root event id>". Room
// ids hold no slash.
func chatKey(room id.RoomID, thread id.EventID) string {
	if thread == "" {
		return "matrix:" + string(room)
	}
	return "matrix:" + string(room) + "/" + string(thread)
}

func routeOf(key string) (route, error) {
	rest, ok := strings.CutPrefix(key, "matrix:")
	room, thread, _ := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(room, "!") {
		return route{}, fmt.Errorf("matrix: %q is not a Matrix chat", key)
	}
	return route{Room: id.RoomID(room), Thread: id.EventID(thread)}, nil
}

var _ bridge.Channel = (*Adapter)(nil)

// Name is the channel's name and chat-key prefix.
func (a *Adapter) Name() string { return "matrix" }

// Pipeline is the channel's delivery pipeline.
func (a *Adapter) Pipeline() *bridge.Pipeline { return a.pipe }

// Route is where messages to the chat key names go.
func (a *Adapter) Route(key string) ([]byte, error) {
	r, err := routeOf(key)
	if err != nil {
		return nil, err
	}
	return r.encode(), nil
}

// Private reports whether the chat is a room of the bot and one person,
// outside any thread. It reads the room's members as the last sync left
// them; a room it cannot read is not private.
func (a *Adapter) Private(key string) bool {
	r, err := routeOf(key)
	if err != nil || r.Thread != "" {
		return false
	}
	return a.direct(context.Background(), r.Room)
}

// direct reports whether room's members are the bot and one person.
func (a *Adapter) direct(ctx context.Context, room id.RoomID) bool {
	members, err := a.states.GetRoomJoinedOrInvitedMembers(ctx, room)
	return err == nil && len(members) <= 2
}

// Invite says how a person reaches the bot alone.
func (a *Adapter) Invite(command string) string {
	return "Start a direct chat with " + string(a.self()) + " and send " + command + " there."
}
