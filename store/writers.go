//go:build cgo

package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/mattn/go-sqlite3"
)

// writers queues this process's writes to one SQLite file, in the order
// they come. SQLite gives its write lock to whichever connection asks
// when it is free, and a connection that finds it taken sleeps and asks
// again (the busy handler): with two connections and many goroutines
// writing, the one that sleeps can find the lock taken at every try —
// the pool hands the other connection to the next writer the moment a
// transaction ends — until its busy timeout passes ("database is
// locked"). Queued here first, a writer asks SQLite only when no other
// writer of this process holds the lock, so it waits for other
// processes alone. A wait longer than the busy timeout fails as
// SQLite's would.
type writers struct{ turn chan struct{} }

func newWriters() *writers { return &writers{turn: make(chan struct{}, 1)} }

// enter waits for the writers' turn.
func (w *writers) enter(ctx context.Context) error {
	select {
	case w.turn <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(busyTimeout)
	defer t.Stop()
	select {
	case w.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return sqlite3.Error{Code: sqlite3.ErrBusy}
	}
}

func (w *writers) leave() { <-w.turn }

// queueWrites makes conn's writes wait for w: a transaction (every one
// takes the write lock as it begins: _txlock=immediate) from its begin to
// its end, and outside a transaction a statement that may write while it
// runs (any Exec; a query SQLite does not call read-only, as an UPDATE …
// RETURNING).
func queueWrites(conn driver.Conn, w *writers) driver.Conn {
	c, ok := conn.(*sqlite3.SQLiteConn)
	if !ok {
		return conn
	}
	return &queuedConn{SQLiteConn: c, w: w}
}

// queuedConn is a connection whose writes wait for the writers' turn.
// database/sql uses a connection from one goroutine at a time.
type queuedConn struct {
	*sqlite3.SQLiteConn
	w    *writers
	inTx bool // this connection holds the turn for its transaction
}

func (c *queuedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.w.enter(ctx); err != nil {
		return nil, err
	}
	tx, err := c.SQLiteConn.BeginTx(ctx, opts)
	if err != nil {
		c.w.leave()
		return nil, err
	}
	c.inTx = true
	return &queuedTx{tx, c}, nil
}

func (c *queuedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// ExecContext runs query, which may hold several statements; outside a
// transaction it waits for the turn.
func (c *queuedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if !c.inTx {
		if err := c.w.enter(ctx); err != nil {
			return nil, err
		}
		defer c.w.leave()
	}
	return c.SQLiteConn.ExecContext(ctx, query, args)
}

// QueryContext runs query in a transaction; outside one database/sql
// prepares it instead (driver.ErrSkip), so that the statement says
// whether it writes. Prepared, a query of several statements runs its
// first alone: the store's queries are one statement each.
func (c *queuedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if !c.inTx {
		return nil, driver.ErrSkip
	}
	return c.SQLiteConn.QueryContext(ctx, query, args)
}

func (c *queuedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.SQLiteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := s.(*sqlite3.SQLiteStmt)
	if !ok {
		return s, nil
	}
	return &queuedStmt{SQLiteStmt: st, c: c}, nil
}

func (c *queuedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// Close gives the turn back if a transaction was left open.
func (c *queuedConn) Close() error {
	if c.inTx {
		c.inTx = false
		c.w.leave()
	}
	return c.SQLiteConn.Close()
}

// queuedTx gives the turn back when it ends.
type queuedTx struct {
	driver.Tx
	c *queuedConn
}

func (t *queuedTx) Commit() error {
	defer t.end()
	return t.Tx.Commit()
}

func (t *queuedTx) Rollback() error {
	defer t.end()
	return t.Tx.Rollback()
}

func (t *queuedTx) end() {
	if t.c.inTx {
		t.c.inTx = false
		t.c.w.leave()
	}
}

// queuedStmt is a prepared statement whose writes outside a transaction
// wait for the turn.
type queuedStmt struct {
	*sqlite3.SQLiteStmt
	c *queuedConn
}

func (s *queuedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if !s.c.inTx {
		if err := s.c.w.enter(ctx); err != nil {
			return nil, err
		}
		defer s.c.w.leave()
	}
	return s.SQLiteStmt.ExecContext(ctx, args)
}

// QueryContext holds the turn, for a statement that writes, until its
// rows are closed: the statement runs as they are read.
func (s *queuedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.c.inTx || s.Readonly() {
		return s.SQLiteStmt.QueryContext(ctx, args)
	}
	if err := s.c.w.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.SQLiteStmt.QueryContext(ctx, args)
	r, ok := rows.(*sqlite3.SQLiteRows)
	if err != nil || !ok {
		s.c.w.leave()
		if err == nil {
			rows.Close()
			err = errors.New("store: the SQLite driver returned rows of an unknown kind")
		}
		return nil, err
	}
	return &queuedRows{SQLiteRows: r, w: s.c.w}, nil
}

// queuedRows gives the turn back when closed.
type queuedRows struct {
	*sqlite3.SQLiteRows
	w *writers
}

func (r *queuedRows) Close() error {
	err := r.SQLiteRows.Close()
	if r.w != nil {
		r.w.leave()
		r.w = nil
	}
	return err
}
