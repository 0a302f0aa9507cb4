package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// Open opens (creating if needed) the SQLite database at path, in WAL mode
// with a busy timeout, and migrates the schema. The parent directory is
// created. Use ":memory:" only for single-connection experiments; tests
// should use a file in t.TempDir().
func Open(path string) (*DB, error) {
	if !Available {
		return nil, ErrNoSQLite
	}
	// Processes starting together on a new file meet SQLite's lock while
	// one of them sets the file up: the others wait their turn.
	for tries := 1; ; tries++ {
		db, err := openSQLite(path)
		if err == nil || !busy(err) || tries == openTries {
			return db, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openTries bounds the attempts to open a file another process is
// setting up: ten seconds, SQLite's busy timeout here.
const openTries = 100

// busyTimeout is how long a statement waits for SQLite's write lock
// (_busy_timeout), and a writer for its turn in this process (writers).
const busyTimeout = 10 * time.Second

// lockTimeout is SQLite's busy timeout: busyTimeout, unless a test
// shortens it to see that writers of one process never wait on SQLite.
var lockTimeout = busyTimeout

func openSQLite(path string) (*DB, error) {
	keepFreedMemory()
	if path != ":memory:" {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
			}
		}
	}
	fts := hasFTS5()
	if err := seed(path, fts); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_busy_timeout=%d&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate", path, lockTimeout.Milliseconds())
	conns := newConnector(dsn)
	sqlDB := sql.OpenDB(conns)
	g, err := gorm.Open(sqlite.New(sqlite.Config{Conn: sqlDB}), gormConfig())
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// A SQLite connection is costly to open (the schema is read, the
	// pragmas run), so connections are kept rather than churned by every
	// burst: database/sql keeps only two idle ones by default.
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetMaxOpenConns(maxConns)
	if err := migrate(g, fts); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	conns.openAhead()
	return &DB{db: g, hot: newHotStatements(sqlDB), fts: fts, now: utcNow, sig: newSignals("", "", nil)}, nil
}

// maxConns bounds the connections to the file. SQLite runs one writer at
// a time, and every write makes the other connections drop their page
// caches, so more connections cost CPU and memory without adding
// throughput: on the Telegram benchmark two used 2.3 ms of CPU a message,
// sixteen 3.0 ms. A store method never queries outside the transaction it
// holds, so two connections cannot wait on each other.
const maxConns = 2

// connector opens the SQLite pool's connections. Once the first is open
// and the schema migrated, openAhead opens the second in the background:
// a connection reads the whole schema before its first statement (about
// 2 ms of processor time), which was paid on the way to the first poll
// by whichever query first found the first connection busy.
type connector struct {
	dsn string
	drv driver.Driver
	// w queues the connections' writes (queueWrites).
	w *writers

	mu    sync.Mutex
	ahead chan opened // the connection opened ahead, until taken
}

type opened struct {
	conn driver.Conn
	err  error
}

func newConnector(dsn string) *connector {
	// The driver as database/sql registered it, without a connection.
	db, _ := sql.Open("sqlite3", "")
	defer db.Close()
	return &connector{dsn: dsn, drv: db.Driver(), w: newWriters()}
}

func (c *connector) Driver() driver.Driver { return c.drv }

// Connect hands out the connection opened ahead, waiting for it if it is
// being opened, else opens one.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if ahead := c.take(); ahead != nil {
		select {
		case o := <-ahead:
			if o.err == nil {
				return queueWrites(o.conn, c.w), nil
			}
		case <-ctx.Done():
			go closeWhenOpen(ahead)
			return nil, ctx.Err()
		}
	}
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return queueWrites(conn, c.w), nil
}

// openAhead starts opening a connection and reading the schema into it.
func (c *connector) openAhead() {
	ahead := make(chan opened, 1)
	c.mu.Lock()
	c.ahead = ahead
	c.mu.Unlock()
	go func() {
		conn, err := c.drv.Open(c.dsn)
		if err == nil {
			err = readSchema(conn)
			if err != nil {
				conn.Close()
			}
		}
		ahead <- opened{conn, err}
	}()
}

// take is the connection opened ahead, once.
func (c *connector) take() chan opened {
	c.mu.Lock()
	defer c.mu.Unlock()
	ahead := c.ahead
	c.ahead = nil
	return ahead
}

// Close closes the connection opened ahead if nothing took it
// (database/sql calls it from DB.Close).
func (c *connector) Close() error {
	if ahead := c.take(); ahead != nil {
		closeWhenOpen(ahead)
	}
	return nil
}

func closeWhenOpen(ahead chan opened) {
	if o := <-ahead; o.err == nil {
		o.conn.Close()
	}
}

// readSchema runs a statement that names a table, which makes SQLite
// read the schema into conn.
func readSchema(conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil
	}
	rows, err := q.QueryContext(context.Background(), "SELECT 1 FROM leases WHERE 0", nil)
	if err != nil {
		return err
	}
	return rows.Close()
}
