package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
)

// connector opens the SQLite pool's connections. Once the first is open
// and the schema migrated, openAhead opens the second in the background:
// a connection reads the whole schema before its first statement (about
// 2 ms of processor time), which was paid on the way to the first poll
// by whichever query first found the first connection busy.
type connector struct {
	dsn string
	drv driver.Driver

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
	return &connector{dsn: dsn, drv: db.Driver()}
}

func (c *connector) Driver() driver.Driver { return c.drv }

// Connect hands out the connection opened ahead, waiting for it if it is
// being opened, else opens one.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	if ahead := c.take(); ahead != nil {
		select {
		case o := <-ahead:
			if o.err == nil {
				return o.conn, nil
			}
		case <-ctx.Done():
			go closeWhenOpen(ahead)
			return nil, ctx.Err()
		}
	}
	return c.drv.Open(c.dsn)
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
