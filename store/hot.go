package store

import (
	"context"
	"database/sql"
	"sync"

	"gorm.io/gorm"
)

// hotStatements keeps the statements every message runs (the inbox's
// writes, the turn's, the session and its settings) prepared on SQLite:
// compiling one cost about as much as running it. Each is prepared once
// per connection and kept for the store's life; the set is bounded
// (maxHot), and a statement past it runs as it did before, compiled for
// its one use. It is safe for concurrent use.
type hotStatements struct {
	db *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

// maxHot bounds the statements kept: those of every message are about
// twenty; the rest room for a turn's INSERT of more messages than usual
// (insertMessages).
const maxHot = 40

func newHotStatements(db *sql.DB) *hotStatements {
	return &hotStatements{db: db, m: make(map[string]*sql.Stmt, maxHot)}
}

// stmt returns query prepared, or nil when it is not kept: prepare is
// false (the caller holds a transaction, whose connection it must not
// wait beside for another one: the store has two), the set is full, or
// preparing failed (running it unprepared then reports why). No lock is
// held while preparing or closing, which may wait for a connection.
func (h *hotStatements) stmt(ctx context.Context, query string, prepare bool) *sql.Stmt {
	h.mu.RLock()
	st, n := h.m[query], len(h.m)
	h.mu.RUnlock()
	if st != nil || !prepare || n >= maxHot {
		return st
	}
	st, err := h.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	h.mu.Lock()
	kept := h.m[query]
	if kept == nil && len(h.m) < maxHot {
		h.m[query] = st
		h.mu.Unlock()
		return st
	}
	h.mu.Unlock()
	// Closed without the lock: closing waits for each connection the
	// statement was prepared on, and one may be a writer's, waiting for
	// SQLite's write lock held by a transaction that needs the lock to
	// find its statements.
	st.Close()
	return kept
}

// prepareHot prepares queries for the transaction the caller is about to
// begin (inside it, hot uses only statements already prepared).
func (d *DB) prepareHot(ctx context.Context, queries ...string) {
	if d.hot == nil {
		return
	}
	for _, q := range queries {
		d.hot.stmt(ctx, q, true)
	}
}

// close closes the kept statements.
func (h *hotStatements) close() {
	h.mu.Lock()
	kept := h.m
	h.m = map[string]*sql.Stmt{}
	h.mu.Unlock()
	for _, st := range kept {
		st.Close()
	}
}

// hotExec runs query, a statement of the per-message path written with
// ? placeholders, in tx (a transaction of d.db's; nil for none), and
// returns the rows it changed. In a transaction it is prepared only if
// it was before (see prepareHot). On PostgreSQL it goes through gorm, whose
// driver keeps its own prepared statements.
func (d *DB) hotExec(ctx context.Context, tx *gorm.DB, query string, args ...any) (int64, error) {
	sqlTx := sqlTxOf(tx)
	if d.hot == nil || (tx != nil && sqlTx == nil) {
		res := d.gormFor(ctx, tx).Exec(query, args...)
		return res.RowsAffected, res.Error
	}
	st := d.hot.stmt(ctx, query, tx == nil)
	var res sql.Result
	var err error
	switch {
	case sqlTx != nil && st != nil:
		res, err = sqlTx.StmtContext(ctx, st).ExecContext(ctx, args...)
	case sqlTx != nil:
		res, err = sqlTx.ExecContext(ctx, query, args...)
	case st != nil:
		res, err = st.ExecContext(ctx, args...)
	default:
		res, err = d.hot.db.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// hotQuery is hotExec for a query; the caller closes the rows.
func (d *DB) hotQuery(ctx context.Context, tx *gorm.DB, query string, args ...any) (*sql.Rows, error) {
	sqlTx := sqlTxOf(tx)
	if d.hot == nil || (tx != nil && sqlTx == nil) {
		return d.gormFor(ctx, tx).Raw(query, args...).Rows()
	}
	st := d.hot.stmt(ctx, query, tx == nil)
	switch {
	case sqlTx != nil && st != nil:
		return sqlTx.StmtContext(ctx, st).QueryContext(ctx, args...)
	case sqlTx != nil:
		return sqlTx.QueryContext(ctx, query, args...)
	case st != nil:
		return st.QueryContext(ctx, args...)
	}
	return d.hot.db.QueryContext(ctx, query, args...)
}

// hotRow is hotQuery for one row: its Scan reports sql.ErrNoRows when
// there is none.
func (d *DB) hotRow(ctx context.Context, tx *gorm.DB, query string, args ...any) rowScanner {
	if d.hot == nil || (tx != nil && sqlTxOf(tx) == nil) {
		return d.gormFor(ctx, tx).Raw(query, args...).Row()
	}
	rows, err := d.hotQuery(ctx, tx, query, args...)
	return firstRow{rows, err}
}

// rowScanner is what *sql.Row and firstRow share.
type rowScanner interface {
	Scan(dest ...any) error
}

// firstRow is the first row of rows, as *sql.Row reads it.
type firstRow struct {
	rows *sql.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}

// gormFor is tx, or d.db with ctx when tx is nil: the way of the
// statements hot does not keep.
func (d *DB) gormFor(ctx context.Context, tx *gorm.DB) *gorm.DB {
	if tx != nil {
		return tx
	}
	return d.db.WithContext(ctx)
}

// sqlTxOf is the database/sql transaction under a gorm transaction, nil
// for none.
func sqlTxOf(tx *gorm.DB) *sql.Tx {
	if tx == nil {
		return nil
	}
	sqlTx, _ := tx.Statement.ConnPool.(*sql.Tx)
	return sqlTx
}
