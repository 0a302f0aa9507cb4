package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/store"

	"loadout/chat/chattest"
)

// running records which process performs the duty, and fails the test
// if two ever do at once.
type running struct {
	mu    sync.Mutex
	now   string
	order []string
	t     *testing.T
}

func (r *running) duty(name string) func(ctx context.Context) {
	return func(ctx context.Context) {
		r.mu.Lock()
		if r.now != "" {
			r.t.Errorf("%s started the duty while %s performs it", name, r.now)
		}
		r.now = name
		r.order = append(r.order, name)
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		r.now = ""
		r.mu.Unlock()
	}
}

func (r *running) who() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// dying is a process that dies: it never gives its lease up.
type dying struct{ Store }

func (dying) ReleaseLease(context.Context, string, string) error { return nil }

// refusals counts the takes of a lease that another holds.
type refusals struct {
	Store
	n *atomic.Int32
}

func (r refusals) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ok, err := r.Store.TakeLease(ctx, name, holder, ttl)
	if err == nil && !ok {
		r.n.Add(1)
	}
	return ok, err
}

// Two processes on one database (a file, or a PostgreSQL schema with
// LOADOUT_TEST_DSN): one performs the duty; when it stops cleanly the
// other takes over at once, and when it dies, once the lease expires.
func TestOneProcessPerformsTheDuty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	open := func() *store.DB {
		db, err := store.OpenTest(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const ttl = 300 * time.Millisecond
	r := &running{t: t}
	start := func(s Store, name string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		l := &Lease{Store: s, Name: "scheduler", Holder: name, TTL: ttl, Logger: quiet}
		go func() { defer close(done); l.Run(ctx, r.duty(name)) }()
		return func() { cancel(); <-done }
	}
	dbA := open()
	stopA := start(dbA, "a")
	chattest.Eventually(t, "a to take the duty", func() bool { return r.who() == "a" })
	// b dies rather than stopping: it never gives its lease up.
	var refused atomic.Int32
	stopB := start(refusals{dying{open()}, &refused}, "b")
	defer stopB()
	chattest.Eventually(t, "b to be refused the lease twice", func() bool { return refused.Load() >= 2 })
	if r.who() != "a" {
		t.Fatalf("the duty moved while a held it: %q", r.who())
	}
	stopA() // a stops cleanly and gives the lease up
	var holder string
	if err := dbA.Gorm().Raw("SELECT holder FROM leases WHERE name = 'scheduler'").Scan(&holder).Error; err != nil {
		t.Fatal(err)
	}
	if holder == "a" {
		t.Fatal("a stopped cleanly but still holds the lease")
	}
	chattest.Eventually(t, "b to take over", func() bool { return r.who() == "b" })

	// c takes over from b once b's lease expires.
	stopC := start(open(), "c")
	defer stopC()
	stopB()
	chattest.Eventually(t, "c to take over", func() bool { return r.who() == "c" })
	if want := []string{"a", "b", "c"}; len(r.order) != 3 || r.order[0] != "a" || r.order[1] != "b" || r.order[2] != "c" {
		t.Fatalf("order = %v, want %v", r.order, want)
	}
}

// A dead holder's lease is taken only once it has expired.
func TestDeadHolderIsWaitedOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := store.OpenTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const ttl = 400 * time.Millisecond
	if ok, err := (dying{db}).TakeLease(ctx, "telegram", "dead", ttl); !ok || err != nil {
		t.Fatalf("take = %v, %v", ok, err)
	}
	died := time.Now()
	if ok, _ := db.TakeLease(ctx, "telegram", "alive", ttl); ok {
		t.Fatal("a live lease was taken")
	}
	if ok, _ := db.TakeLease(ctx, "telegram", "dead", ttl); !ok {
		t.Fatal("the holder could not renew")
	}
	chattest.Eventually(t, "the lease to expire", func() bool {
		ok, _ := db.TakeLease(ctx, "telegram", "alive", ttl)
		return ok
	})
	if d := time.Since(died); d < ttl {
		t.Fatalf("taken after %s, before it expired", d)
	}
}

// renewalsFail is a store that grants a lease once and then never again,
// as when another process took it over.
type renewalsFail struct {
	Store
	taken atomic.Bool
}

func (r *renewalsFail) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if r.taken.Swap(true) {
		return false, nil
	}
	return r.Store.TakeLease(ctx, name, holder, ttl)
}

// Once (a chat's claim) runs its work only when the lease is free, gives
// the lease back after, and ends the work's context when a renewal fails.
func TestOnceRunsWhileTheLeaseIsHeld(t *testing.T) {
	db, err := store.OpenTest(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if ok, err := db.TakeLease(ctx, "chat:x", "b", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	ran := false
	l := &Lease{Store: db, Name: "chat:x", Holder: "a", TTL: 300 * time.Millisecond}
	if ok, err := l.Once(ctx, func(context.Context) error { ran = true; return nil }); ok || err != nil || ran {
		t.Fatalf("Once on a held lease: ok %v, err %v, ran %v", ok, err, ran)
	}

	boom := errors.New("boom")
	l = &Lease{Store: db, Name: "chat:y", Holder: "a", TTL: 300 * time.Millisecond}
	if ok, err := l.Once(ctx, func(context.Context) error { return boom }); !ok || !errors.Is(err, boom) {
		t.Fatalf("Once on a free lease: ok %v, err %v", ok, err)
	}
	if ok, err := db.TakeLease(ctx, "chat:y", "b", time.Minute); !ok || err != nil {
		t.Fatalf("the lease was not given back: %v %v", ok, err)
	}

	l = &Lease{Store: &renewalsFail{Store: db}, Name: "chat:z", Holder: "a", TTL: 30 * time.Millisecond}
	ok, err := l.Once(ctx, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("the work went on after the lease was lost")
		}
	})
	if !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("Once with a lost lease: ok %v, err %v", ok, err)
	}
}

// stopsWhileTaking is a store on which the process is stopped while a
// lease is being taken: the take succeeds, but the context has ended.
type stopsWhileTaking struct {
	Store
	stop context.CancelFunc
}

func (s stopsWhileTaking) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ok, err := s.Store.TakeLease(ctx, name, holder, ttl)
	s.stop()
	return ok, err
}

// Found by probing: a duty was started on a context its stop had already
// ended when the stop came while the lease was taken (the scheduler then
// logged its reads as failed). Neither Run nor Once starts it, and the
// lease is given back.
func TestAStopWhileTakingStartsNoDuty(t *testing.T) {
	db, err := store.OpenTest(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, how := range []string{"Run", "Once"} {
		ctx, cancel := context.WithCancel(context.Background())
		l := &Lease{Store: stopsWhileTaking{db, cancel}, Name: "duty-" + how, Holder: "a", TTL: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		ran := false
		if how == "Run" {
			l.Run(ctx, func(context.Context) { ran = true })
		} else {
			ok, _ := l.Once(ctx, func(context.Context) error { ran = true; return nil })
			if ok {
				t.Errorf("Once reported the duty done")
			}
		}
		if ran {
			t.Errorf("%s started the duty on an ended context", how)
		}
		if ok, err := db.TakeLease(context.Background(), l.Name, "b", time.Minute); !ok || err != nil {
			t.Errorf("%s kept the lease: %v %v", how, ok, err)
		}
	}
}
