//go:build goolm

package matrix

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/crypto/goolm/libolmpickle"
)

// pickledColumn is a column of mautrix's crypto tables that holds
// pickles (sealed with the pickle key), and the columns that name its
// rows.
type pickledColumn struct {
	table, column string
	keys          []string
}

// pickledColumns are every column of the crypto tables sealed with the
// pickle key: the olm account, olm sessions, room keys received and
// sent, secrets.
func pickledColumns() []pickledColumn {
	return []pickledColumn{
		{"crypto_account", "account", []string{"account_id"}},
		{"crypto_olm_session", "session", []string{"account_id", "session_id"}},
		{"crypto_megolm_inbound_session", "session", []string{"account_id", "session_id"}},
		{"crypto_megolm_outbound_session", "session", []string{"account_id", "room_id"}},
		{"crypto_secrets", "secret", []string{"account_id", "name"}},
	}
}

// rekey moves the encryption state from the pickle key an earlier
// version made and kept in the database beside it (statePickle) to
// matrix.pickle_key, then forgets the old key: every pickle the old key
// opens is sealed again with the new one, in one transaction; one the
// new key opens already (a move cut short) is left as it is. Nothing is
// done when the database keeps no old key.
func (a *Adapter) rekey(ctx context.Context, key []byte) error {
	old, err := a.store.State(ctx, statePickle)
	if err != nil {
		return fmt.Errorf("read the pickle key an earlier version kept: %w", err)
	}
	if old == "" {
		return nil
	}
	if old != string(key) {
		n := 0
		err := a.db.DoTxn(ctx, nil, func(ctx context.Context) error {
			for _, c := range pickledColumns() {
				k, err := rekeyColumn(ctx, a.db, c, []byte(old), key)
				if err != nil {
					return err
				}
				n += k
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("move the encryption state to matrix.pickle_key: %w", err)
		}
		a.log.Info("matrix: the encryption state is now kept under matrix.pickle_key; the key an earlier version kept in the database is forgotten", "pickles", n)
	}
	if err := a.store.SetState(ctx, statePickle, ""); err != nil {
		return fmt.Errorf("forget the pickle key an earlier version kept: %w", err)
	}
	return nil
}

// rekeyColumn seals again with key the pickles of c that old opens, and
// returns how many.
func rekeyColumn(ctx context.Context, db *dbutil.Database, c pickledColumn, old, key []byte) (int, error) {
	type pickle struct {
		names []any
		data  []byte
	}
	rows, err := db.Query(ctx, "SELECT "+strings.Join(c.keys, ", ")+", "+c.column+" FROM "+c.table+" WHERE "+c.column+" IS NOT NULL")
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", c.table, err)
	}
	var all []pickle
	for rows.Next() {
		names := make([]string, len(c.keys))
		dest := make([]any, 0, len(c.keys)+1)
		for i := range names {
			dest = append(dest, &names[i])
		}
		var p pickle
		if err := rows.Scan(append(dest, &p.data)...); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read %s: %w", c.table, err)
		}
		for _, n := range names {
			p.names = append(p.names, n)
		}
		all = append(all, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", c.table, err)
	}
	var where []string
	for i, k := range c.keys {
		where = append(where, fmt.Sprintf("%s=$%d", k, i+2))
	}
	update := "UPDATE " + c.table + " SET " + c.column + "=$1 WHERE " + strings.Join(where, " AND ")
	n := 0
	for _, p := range all {
		plain, err := libolmpickle.Unpickle(old, p.data)
		if err != nil {
			if _, again := libolmpickle.Unpickle(key, p.data); again == nil {
				continue // moved already
			}
			return n, fmt.Errorf("a pickle in %s that neither the old key nor matrix.pickle_key opens: %w", c.table, err)
		}
		sealed, err := libolmpickle.Pickle(key, plain)
		if err != nil {
			return n, err
		}
		if _, err := db.Exec(ctx, update, append([]any{sealed}, p.names...)...); err != nil {
			return n, fmt.Errorf("write %s: %w", c.table, err)
		}
		n++
	}
	return n, nil
}
