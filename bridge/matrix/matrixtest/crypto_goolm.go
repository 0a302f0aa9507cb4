//go:build goolm

package matrixtest

import (
	"context"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const encryption = true

// startCrypto gives cli end-to-end encryption, its state in the SQLite
// file at path.
func startCrypto(ctx context.Context, cli *mautrix.Client, path string) (any, error) {
	helper, err := cryptohelper.NewCryptoHelper(cli, []byte("loadout-test-pickle"), path)
	if err != nil {
		return nil, err
	}
	if err := helper.Init(ctx); err != nil {
		return nil, err
	}
	cli.Crypto = helper
	return helper, nil
}

// SayWithheld says text in the encrypted room under a new session whose
// keys are kept back on their way to the others' devices, and so is
// every later to-device message (answers to key requests too), until
// ShareSession sends them.
func (p *Person) SayWithheld(t testing.TB, room id.RoomID, text string) id.EventID {
	t.Helper()
	mach := p.crypto.(*cryptohelper.CryptoHelper).Machine()
	if err := mach.CryptoStore.RemoveOutboundGroupSession(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	p.tr.withhold(true)
	return p.Say(t, room, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

// ShareSession sends the keys SayWithheld kept back.
func (p *Person) ShareSession(t testing.TB, _ id.RoomID, _ ...id.UserID) {
	t.Helper()
	p.tr.withhold(false)
	if err := p.tr.sendKept(); err != nil {
		t.Fatal(err)
	}
}

// RefuseKeyRequests makes the person's device answer no other device's
// request for room keys, as Element does for other people's devices: a
// device that did not get a message's keys when it was sent never
// reads it.
func (p *Person) RefuseKeyRequests(t testing.TB) {
	t.Helper()
	p.crypto.(*cryptohelper.CryptoHelper).Machine().AllowKeyShare = func(context.Context, *id.Device, event.RequestedKeyInfo) *crypto.KeyShareRejection {
		return &crypto.KeyShareRejectNoResponse
	}
}
