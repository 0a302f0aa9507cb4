//go:build goolm

package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/crypto/olm"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// encryption: this build has end-to-end encryption.
const encryption = true

// goolmE2EE is mautrix's crypto helper, with goolm, its olm account,
// sessions and device lists in loadout's database (the crypto_ tables),
// one account per bot device, sealed with matrix.pickle_key.
type goolmE2EE struct {
	a      *Adapter
	helper *cryptohelper.CryptoHelper

	mu sync.Mutex
	// wedged are the devices whose olm session with the bot broke in
	// the sync under way: Sync makes new sessions with them.
	wedged []wedgedDevice
}

type wedgedDevice struct {
	user id.UserID
	key  id.SenderKey
}

// startE2EE sets up the bot device's encryption, holding the crypto
// lock: the state an earlier version kept under a key of its own is
// moved to matrix.pickle_key; the olm account is read, or made and its
// keys uploaded on the first start; the machinery hooks into the sync;
// and, once, cross-signing keys are published, so people's clients show
// the device as the bot's own.
func startE2EE(ctx context.Context, a *Adapter) (e2ee, error) {
	if a.cfg.PickleKey == "" {
		return nil, errors.New("matrix.pickle_key is required: the bot's encryption keys are kept in the database under it; " + pickleKeyHelp)
	}
	key := []byte(a.cfg.PickleKey)
	e := &goolmE2EE{a: a}
	err := a.crypto.do(ctx, func(ctx context.Context) error {
		if err := a.rekey(ctx, key); err != nil {
			return err
		}
		account := string(a.cli.UserID) + "/" + string(a.cli.DeviceID)
		st := olmStore{crypto.NewSQLCryptoStore(a.db, dbutil.NoopLogger, account, a.cli.DeviceID, key)}
		if err := st.DB.Upgrade(ctx); err != nil {
			return fmt.Errorf("set up the crypto tables: %w", err)
		}
		helper, err := cryptohelper.NewCryptoHelper(a.cli, key, st)
		if err != nil {
			return err
		}
		if err := helper.Init(ctx); err != nil {
			if errors.Is(err, olm.ErrBadMAC) {
				return fmt.Errorf("matrix.pickle_key does not open the bot's encryption keys in the database (is it the key they were kept under?): %w", err)
			}
			return err
		}
		e.helper = helper
		helper.Machine().NeedsUnwedgeCallback = e.wedge
		a.crossSign(ctx, helper.Machine())
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.cli.Crypto = lockedCrypto{e.helper, a.crypto}
	return e, nil
}

// lockedCrypto is the crypto helper as the client uses it to encrypt
// what it sends: holding the crypto lock, since sending may make olm
// sessions and ratchets the room's outbound session.
type lockedCrypto struct {
	*cryptohelper.CryptoHelper
	lock *cryptoLock
}

func (c lockedCrypto) Encrypt(ctx context.Context, room id.RoomID, t event.Type, content any) (*event.EncryptedEventContent, error) {
	var enc *event.EncryptedEventContent
	err := c.lock.do(ctx, func(ctx context.Context) error {
		var err error
		enc, err = c.CryptoHelper.Encrypt(ctx, room, t, content)
		return err
	})
	return enc, err
}

// Sync hands res to the syncer, with the machinery's hooks, holding the
// crypto lock. What mautrix would do in goroutines of its own, outside
// the lock, is done here before the lock is let go: answering room key
// requests, and making new olm sessions with devices whose session
// broke.
func (e *goolmE2EE) Sync(ctx context.Context, res *mautrix.RespSync, since string) error {
	return e.a.crypto.do(ctx, func(ctx context.Context) error {
		res, requests := keyRequests(res)
		if err := e.a.cli.Syncer.ProcessResponse(ctx, res, since); err != nil {
			// A panic in the machinery, already recovered: the events
			// are still read, and what failed is logged.
			e.a.log.Error("matrix: processing a sync failed", "err", err)
		}
		mach := e.helper.Machine()
		for _, evt := range requests {
			mach.HandleRoomKeyRequest(ctx, evt.Sender, evt.Content.AsRoomKeyRequest())
		}
		e.mu.Lock()
		wedged := e.wedged
		e.wedged = nil
		e.mu.Unlock()
		for _, d := range wedged {
			mach.UnwedgeDevice(ctx, d.user, d.key)
		}
		return nil
	})
}

// keyRequests takes the room key requests out of res's to-device
// messages, parsed.
func keyRequests(res *mautrix.RespSync) (*mautrix.RespSync, []*event.Event) {
	var rest, requests []*event.Event
	for _, evt := range res.ToDevice.Events {
		if evt.Type.Type != event.ToDeviceRoomKeyRequest.Type {
			rest = append(rest, evt)
			continue
		}
		evt.Type.Class = event.ToDeviceEventType
		if evt.Content.Parsed == nil && evt.Content.ParseRaw(evt.Type) != nil {
			continue
		}
		requests = append(requests, evt)
	}
	if len(requests) == 0 {
		return res, nil
	}
	out := *res
	out.ToDevice.Events = rest
	return &out, requests
}

// wedge notes a device whose olm session with the bot broke.
func (e *goolmE2EE) wedge(_ context.Context, user id.UserID, key id.SenderKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wedged = append(e.wedged, wedgedDevice{user, key})
}

// Reload reads the olm account again, holding the crypto lock.
func (e *goolmE2EE) Reload(ctx context.Context) error {
	return e.a.crypto.do(ctx, func(ctx context.Context) error {
		mach := e.helper.Machine()
		if err := mach.Load(ctx); err != nil {
			return fmt.Errorf("read the olm account: %w", err)
		}
		if !mach.GetAccount().Shared {
			return errors.New("the bot device's olm account is missing from the database")
		}
		return nil
	})
}

// crossSign publishes the account's cross-signing keys once (their
// private halves in the account's secret storage, its recovery key kept
// in the database) and signs this device with them; a later device is
// signed with the kept keys. A homeserver that asks for the password
// gets matrix.password; without one, the device stays unsigned and the
// log says why. Failing here never stops the channel.
func (a *Adapter) crossSign(ctx context.Context, mach *crypto.OlmMachine) {
	signed := stateCrossSign + ":" + string(a.cli.DeviceID)
	if done, err := a.store.State(ctx, signed); err != nil || done != "" {
		return
	}
	recovery, err := a.store.State(ctx, stateCrossSign)
	if err != nil {
		return
	}
	if recovery != "" {
		if err := mach.VerifyWithRecoveryKey(ctx, recovery); err != nil {
			a.log.Warn("matrix: could not sign this device with the account's cross-signing keys", "err", err)
			return
		}
	} else {
		var uia mautrix.UIACallback
		if a.cfg.Password != "" {
			uia = func(r *mautrix.RespUserInteractive) any {
				return &mautrix.ReqUIAuthLogin{
					BaseAuthData: mautrix.BaseAuthData{Type: mautrix.AuthTypePassword, Session: r.Session},
					User:         string(a.cli.UserID), Password: a.cfg.Password,
				}
			}
		}
		recovery, _, err = mach.GenerateAndUploadCrossSigningKeys(ctx, uia, "")
		if err != nil {
			hint := ""
			if a.cfg.Password == "" {
				hint = "; the homeserver may want matrix.password for this"
			}
			a.log.Warn("matrix: could not publish the bot's cross-signing keys"+hint, "err", err)
			return
		}
		if err := a.store.SetState(ctx, stateCrossSign, recovery); err != nil {
			a.log.Warn("matrix: could not keep the cross-signing recovery key", "err", err)
			return
		}
		if err := mach.SignOwnDevice(ctx, mach.OwnIdentity()); err != nil {
			a.log.Warn("matrix: could not sign this device", "err", err)
			return
		}
		if err := mach.SignOwnMasterKey(ctx); err != nil {
			a.log.Warn("matrix: could not sign the master key", "err", err)
		}
	}
	a.store.SetState(ctx, signed, "1")
	a.log.Info("matrix: this device is signed with the account's cross-signing keys", "device", a.cli.DeviceID)
}

func (e *goolmE2EE) Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	dec, err := e.helper.Decrypt(ctx, evt)
	// Keys withheld by the sender's device may still come (once it
	// trusts the bot's): they are waited for like keys not yet arrived.
	if errors.Is(err, crypto.ErrNoSessionFound) || errors.Is(err, crypto.ErrGroupSessionWithheld) {
		return nil, fmt.Errorf("%w: %w", errNoKeys, err)
	}
	return dec, err
}

func (e *goolmE2EE) RequestKeys(ctx context.Context, evt *event.Event) {
	c := evt.Content.AsEncrypted()
	if c == nil {
		return
	}
	e.helper.RequestSession(ctx, evt.RoomID, c.SenderKey, c.SessionID, evt.Sender, c.DeviceID)
}
