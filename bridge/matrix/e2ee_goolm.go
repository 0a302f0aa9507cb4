//go:build goolm

package matrix

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
)

// goolmE2EE is mautrix's crypto helper, with goolm, its olm account,
// sessions and device lists in loadout's database (the crypto_ tables),
// one account per bot device.
type goolmE2EE struct {
	helper *cryptohelper.CryptoHelper
}

// startE2EE sets up the bot device's encryption: its olm account (made
// and its keys uploaded on the first start), the hooks into the sync,
// and, once, cross-signing keys, so people's clients show the device as
// the bot's own.
func startE2EE(ctx context.Context, a *Adapter) (e2ee, error) {
	pickle, err := a.pickleKey(ctx)
	if err != nil {
		return nil, err
	}
	helper, err := cryptohelper.NewCryptoHelper(a.cli, pickle, a.db)
	if err != nil {
		return nil, err
	}
	helper.DBAccountID = string(a.cli.UserID) + "/" + string(a.cli.DeviceID)
	if err := helper.Init(ctx); err != nil {
		return nil, err
	}
	a.cli.Crypto = helper
	a.crossSign(ctx, helper.Machine())
	return goolmE2EE{helper}, nil
}

// pickleKey is the key the olm state is pickled with, made on the first
// start and kept in the database with it.
func (a *Adapter) pickleKey(ctx context.Context) ([]byte, error) {
	s, err := a.store.State(ctx, statePickle)
	if err != nil {
		return nil, fmt.Errorf("read the pickle key: %w", err)
	}
	if s == "" {
		b := make([]byte, 32)
		rand.Read(b)
		s = base64.RawStdEncoding.EncodeToString(b)
		if err := a.store.SetState(ctx, statePickle, s); err != nil {
			return nil, fmt.Errorf("keep the pickle key: %w", err)
		}
	}
	return []byte(s), nil
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

func (e goolmE2EE) Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	dec, err := e.helper.Decrypt(ctx, evt)
	// Keys withheld by the sender's device may still come (once it
	// trusts the bot's): they are waited for like keys not yet arrived.
	if errors.Is(err, crypto.ErrNoSessionFound) || errors.Is(err, crypto.ErrGroupSessionWithheld) {
		return nil, fmt.Errorf("%w: %w", errNoKeys, err)
	}
	return dec, err
}

func (e goolmE2EE) RequestKeys(ctx context.Context, evt *event.Event) {
	c := evt.Content.AsEncrypted()
	if c == nil {
		return
	}
	e.helper.RequestSession(ctx, evt.RoomID, c.SenderKey, c.SessionID, evt.Sender, c.DeviceID)
}
