//go:build !goolm

package matrixtest

import (
	"context"
	"errors"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

const encryption = false

func startCrypto(context.Context, *mautrix.Client, string) (any, error) {
	return nil, errors.New("end-to-end encryption needs the goolm build tag")
}

// SayWithheld needs encryption: the test skips.
func (p *Person) SayWithheld(t testing.TB, _ id.RoomID, _ string) id.EventID {
	t.Skip("end-to-end encryption needs the goolm build tag")
	return ""
}

// ShareSession needs encryption: the test skips.
func (p *Person) ShareSession(t testing.TB, _ id.RoomID, _ ...id.UserID) {
	t.Skip("end-to-end encryption needs the goolm build tag")
}

// RefuseKeyRequests needs encryption: the test skips.
func (p *Person) RefuseKeyRequests(t testing.TB) {
	t.Skip("end-to-end encryption needs the goolm build tag")
}
