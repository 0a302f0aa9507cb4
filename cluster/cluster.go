// Package cluster runs the duties only one loadout process may perform
// at a time when several share a database — polling Telegram, keeping a
// Slack Socket Mode connection, running the scheduler — under a lease
// kept in the database: one process holds it and renews it; when that
// process dies, another takes it over once it expires.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"loadout/bridge"
)

// Store keeps the leases.
type Store interface {
	TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// DefaultTTL is how long a lease lasts unless renewed (cluster.lease):
// how soon another process takes over a dead one's duty.
const DefaultTTL = 15 * time.Second

// Holder names this process for the leases it holds: host, pid and a
// random part, so a restarted process is a new holder.
func Holder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Exclusive is a bridge.Exclusive over leases in s held as holder: a
// duty runs while this process holds the lease named after it; an error
// of the duty stops it and is returned.
func Exclusive(s Store, holder string, ttl time.Duration, log *slog.Logger) bridge.Exclusive {
	return func(ctx context.Context, duty string, run func(ctx context.Context) error) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var dutyErr error
		l := &Lease{Store: s, Name: duty, Holder: holder, TTL: ttl, Logger: log}
		l.Run(ctx, func(ctx context.Context) {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				dutyErr = err
				cancel()
			}
		})
		return dutyErr
	}
}

// Claim is a bridge.Claim over leases in s held as holder, each lasting
// ttl unless renewed: a chat's claim is a lease named after it.
func Claim(s Store, holder string, ttl time.Duration, log *slog.Logger) bridge.Claim {
	return func(ctx context.Context, name string, run func(ctx context.Context) error) (bool, error) {
		l := &Lease{Store: s, Name: name, Holder: holder, TTL: ttl, Logger: log}
		return l.Once(ctx, run)
	}
}

// Lease is one duty's lease.
type Lease struct {
	Store  Store
	Name   string
	Holder string
	// TTL is the lease's length; it is tried and renewed every TTL/3.
	TTL    time.Duration
	Logger *slog.Logger
}

// Run performs duty while this process holds the lease: it tries to take
// the lease every TTL/3; once it has it, it renews it every TTL/3 and
// cancels duty's context as soon as a renewal fails (the duty is then
// another's after the lease expires). It returns once ctx ends and duty
// has returned, giving the lease up.
func (l *Lease) Run(ctx context.Context, duty func(ctx context.Context)) {
	ttl, log := l.settings()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		if ok, err := l.Store.TakeLease(ctx, l.Name, l.Holder, ttl); err != nil && ctx.Err() == nil {
			log.Warn("cluster: could not take a lease; trying again", "err", err)
		} else if ok && ctx.Err() == nil {
			log.Info("cluster: this process holds the lease")
			l.hold(ctx, ttl, t, duty, log)
		}
		select {
		case <-ctx.Done():
			// Given up so another process need not wait for it to expire.
			_ = l.Store.ReleaseLease(context.WithoutCancel(ctx), l.Name, l.Holder)
			return
		case <-t.C:
		}
	}
}

// Once performs duty now if this process can take the lease, renewing it
// every TTL/3 while duty runs and giving it up after; duty's context ends
// as soon as a renewal fails. It reports false, without calling duty,
// when another process holds the lease.
func (l *Lease) Once(ctx context.Context, duty func(ctx context.Context) error) (bool, error) {
	ttl, log := l.settings()
	ok, err := l.Store.TakeLease(ctx, l.Name, l.Holder, ttl)
	if err != nil || !ok {
		return false, err
	}
	defer l.Store.ReleaseLease(context.WithoutCancel(ctx), l.Name, l.Holder)
	if err := ctx.Err(); err != nil {
		// Stopped while the lease was being taken: the duty is not
		// started on a context that has already ended.
		return false, err
	}
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	var dutyErr error
	l.hold(ctx, ttl, t, func(ctx context.Context) { dutyErr = duty(ctx) }, log)
	return true, dutyErr
}

// settings are the lease's TTL and logger, defaulted.
func (l *Lease) settings() (time.Duration, *slog.Logger) {
	ttl := l.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	return ttl, log.With("lease", l.Name)
}

// hold runs duty while the lease is renewed.
func (l *Lease) hold(ctx context.Context, ttl time.Duration, t *time.Ticker, duty func(ctx context.Context), log *slog.Logger) {
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); duty(dctx) }()
	defer func() { cancel(); <-done }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
			ok, err := l.Store.TakeLease(ctx, l.Name, l.Holder, ttl)
			if err != nil || !ok {
				if ctx.Err() == nil {
					log.Warn("cluster: lost the lease; the duty stops here", "err", err)
				}
				return
			}
		}
	}
}
