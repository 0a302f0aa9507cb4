package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// TestTheSecondConnectionIsOpenedAhead: once openAhead has run, the
// pool's next connection is the one opened ahead with the schema read
// into it; the driver is not asked again, and a connection nothing took
// is closed with the pool.
func TestTheSecondConnectionIsOpenedAhead(t *testing.T) {
	drv := &countingDriver{}
	c := &connector{dsn: "x", drv: drv}
	first, err := c.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c.openAhead()
	second, err := c.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first == second || drv.opens() != 2 {
		t.Fatalf("%d connections opened, want 2 distinct", drv.opens())
	}
	if q := second.(*countingConn).queries; len(q) != 1 || q[0] != "SELECT 1 FROM leases WHERE 0" {
		t.Fatalf("the connection opened ahead ran %q, want the schema read", q)
	}
	// A third is opened on demand.
	if _, err := c.Connect(t.Context()); err != nil || drv.opens() != 3 {
		t.Fatalf("third connection: %v, %d opens", err, drv.opens())
	}

	// Untaken, it is closed with the pool.
	c = &connector{dsn: "x", drv: drv}
	c.openAhead()
	c.Close()
	if got := drv.last(); !got.closed {
		t.Fatal("the connection opened ahead was left open")
	}

	// A failure ahead is not handed out: the driver is asked again.
	drv.fail = errors.New("no")
	c = &connector{dsn: "x", drv: drv}
	c.openAhead()
	drv.mu.Lock()
	drv.fail = nil
	drv.mu.Unlock()
	if conn, err := c.Connect(t.Context()); err != nil || conn == nil {
		t.Fatalf("after a failure ahead: %v", err)
	}
}

// TestOpenHasTwoConnections: on a real file, two connections at once are
// the first and the one opened ahead, each able to read.
func TestOpenHasTwoConnections(t *testing.T) {
	if !Available {
		t.Skip("no SQLite in this build")
	}
	db, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlDB, err := db.Gorm().DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var n int
	if err := a.QueryRowContext(ctx, "SELECT count(*) FROM sessions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRowContext(ctx, "SELECT count(*) FROM sessions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if open := sqlDB.Stats().OpenConnections; open != 2 {
		t.Fatalf("%d connections open, want 2", open)
	}
}

type countingDriver struct {
	mu    sync.Mutex
	conns []*countingConn
	fail  error
}

func (d *countingDriver) Open(string) (driver.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	c := &countingConn{}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *countingDriver) opens() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

func (d *countingDriver) last() *countingConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[len(d.conns)-1]
}

type countingConn struct {
	queries []string
	closed  bool
}

func (c *countingConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not here") }
func (c *countingConn) Close() error                        { c.closed = true; return nil }
func (c *countingConn) Begin() (driver.Tx, error)           { return nil, errors.New("not here") }
func (c *countingConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	c.queries = append(c.queries, q)
	return emptyRows{}, nil
}

type emptyRows struct{}

func (emptyRows) Columns() []string         { return nil }
func (emptyRows) Close() error              { return nil }
func (emptyRows) Next([]driver.Value) error { return errors.New("EOF") }
