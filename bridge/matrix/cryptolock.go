package matrix

import (
	"context"
	"log/slog"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// cryptoClaim names the claim that keeps the bot device's encryption
// state to one process of those sharing the database.
const cryptoClaim = "matrix:crypto"

// cryptoLock keeps the bot device's encryption state to one user at a
// time: one goroutine of this process, and, when processes share the
// database (Delivery.Claim), one process of those. An olm session
// ratchets with every message either way, and the olm account changes
// with every one-time key made or used: two users working each on a
// copy read from the database would each write over what the other
// wrote, and a message key used twice is refused by the device it goes
// to. The zero value is not usable: newCryptoLock makes one.
type cryptoLock struct {
	// sem holds one token while the lock is held in this process; a
	// channel, so that waiting for it ends with the context.
	sem   chan struct{}
	claim bridge.Claim
	log   *slog.Logger
}

func newCryptoLock(claim bridge.Claim, log *slog.Logger) *cryptoLock {
	return &cryptoLock{sem: make(chan struct{}, 1), claim: claim, log: log}
}

// Longest and shortest waits between tries of a claim another process
// holds.
const (
	cryptoWaitMin = 20 * time.Millisecond
	cryptoWaitMax = 500 * time.Millisecond
)

// do runs fn holding the lock, with a context that ends if the claim is
// lost, and returns fn's error; or ctx's, when ctx ends before the lock
// is had. Calls do not nest: fn must not call do.
func (l *cryptoLock) do(ctx context.Context, fn func(ctx context.Context) error) error {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.sem }()
	if l.claim == nil {
		return fn(ctx)
	}
	wait := cryptoWaitMin
	for {
		ok, err := l.claim(ctx, cryptoClaim, fn)
		if ok {
			return err
		}
		if err != nil && ctx.Err() == nil {
			l.log.Warn("matrix: could not claim the encryption state; trying again", "err", err)
		}
		if backoff.Sleep(ctx, wait) != nil {
			return ctx.Err()
		}
		wait = min(2*wait, cryptoWaitMax)
	}
}
