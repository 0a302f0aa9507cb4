package bridgetest

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/chat/chattest"
	"loadout/cluster"
	"loadout/store"
	"loadout/store/storetest"
)

// Replicas: a test starts two or more processes of a channel on one
// database (a file, or PostgreSQL with LOADOUT_TEST_DSN, which the
// processes inherit), kills one with SIGKILL and watches another take
// its duties over. Each process is the test binary itself running one
// test function, the replica, which reads what it needs from the
// environment.

// EnvReplica names the replica a process runs as (its lease holder);
// a replica test function skips when it is not set.
const EnvReplica = "LOADOUT_TEST_REPLICA"

// ReplicaLease is the lease of the replicas' duties and chat claims:
// short, so a dead holder is replaced within a test's patience.
const ReplicaLease = time.Second

// Replica is one process of a replicas test.
type Replica struct {
	// Name is the replica's name, its lease holder.
	Name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// StartReplica runs test (a test function of this binary) in a new
// process named name, with env added to this process's environment and
// its log in a file of dir. The process is killed when the test ends, if
// it was not before.
func StartReplica(t testing.TB, dir, test, name string, env ...string) *Replica {
	t.Helper()
	r := &Replica{Name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	r.cmd.Env = append(append(os.Environ(), EnvReplica+"="+name), env...)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); out.Close(); close(r.done) }()
	t.Cleanup(r.Kill)
	return r
}

// Kill kills the process (SIGKILL: nothing runs at exit) and waits for
// it to end.
func (r *Replica) Kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// Log is what the process logged so far.
func (r *Replica) Log() string {
	b, _ := os.ReadFile(r.log)
	return string(b)
}

// WaitLogged waits until the process logged text.
func (r *Replica) WaitLogged(t testing.TB, text string) {
	t.Helper()
	Await(t, r.Name+" to log "+text, func() bool { return strings.Contains(r.Log(), text) })
}

// AwaitFor is how long Await waits: processes that start, migrate a
// schema and take leases over on a loaded machine are slow, and a wait
// that gives up too early tells nothing.
const AwaitFor = 2 * time.Minute

// Await waits up to AwaitFor for cond, asking every 20ms (cond may ask a
// database or a mail server), and fails the test naming what it waited
// for.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(AwaitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", AwaitFor, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReplicaEnv is the store and delivery of a replica process: the
// engine on the database at dbPath with model, and the duties and chat
// claims under leases held as the replica's name, lasting ReplicaLease;
// the journal is the inbox, as cmd's is on a shared database. It logs
// to stderr (the replica's log file).
func ReplicaEnv(t testing.TB, dbPath string, model *chattest.ModelServer) (*storetest.Env, bridge.Delivery) {
	t.Helper()
	env := storetest.NewEnv(t, storetest.Options{DBPath: dbPath, Model: model})
	holder := os.Getenv(EnvReplica)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return env, bridge.Delivery{Journal: bridge.InboxJournal(env.Store), Logger: log,
		Exclusive: cluster.Exclusive(env.Store, holder, ReplicaLease, log),
		Claim:     cluster.Claim(env.Store, holder, ReplicaLease, log)}
}

// LeaseHolder is who holds lease name in db now, "" when nobody does.
func LeaseHolder(t testing.TB, db *store.DB, name string) string {
	t.Helper()
	var holder string
	err := db.Gorm().Raw("SELECT holder FROM leases WHERE name = ? AND expires_at > ?", name, time.Now().UnixMilli()).Scan(&holder).Error
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

// Idle reports whether channel has nothing unfinished in db's inbox:
// no process will send anything more for what it took in.
func Idle(t testing.TB, db *store.DB, channel string) bool {
	t.Helper()
	items, err := db.Unfinished(context.Background(), channel)
	if err != nil {
		t.Fatal(err)
	}
	return len(items) == 0
}

// Dies is a store as a process killed outright leaves it: the process
// never gives a lease back.
type Dies struct{ cluster.Store }

func (Dies) ReleaseLease(context.Context, string, string) error { return nil }

// Refusals is a store that counts, in N, the takes of a lease another
// holds: how often a process found the duty taken.
type Refusals struct {
	cluster.Store
	N *atomic.Int32
}

func (r Refusals) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ok, err := r.Store.TakeLease(ctx, name, holder, ttl)
	if err == nil && !ok {
		r.N.Add(1)
	}
	return ok, err
}
