//go:build goolm

package matrix

import (
	"context"
	"database/sql"
	"errors"

	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/olm"
	"maunium.net/go/mautrix/id"
)

// olmStore is mautrix's SQL crypto store without what it keeps in
// memory: the olm account and the olm sessions are read from the
// database every time they are asked for. Processes sharing the
// database take turns with them (cryptoLock), and each must start from
// what the last one wrote, not from its own older copy.
type olmStore struct {
	*crypto.SQLCryptoStore
}

var _ crypto.Store = olmStore{}

// GetAccount reads the olm account from the database; nil when there is
// none yet.
func (s olmStore) GetAccount(ctx context.Context) (*crypto.OlmAccount, error) {
	s.Account = nil // the store's copy: read again
	return s.SQLCryptoStore.GetAccount(ctx)
}

// HasSession reports whether there is an olm session with the device
// whose identity key is key.
func (s olmStore) HasSession(ctx context.Context, key id.SenderKey) bool {
	var sid id.SessionID
	err := s.DB.QueryRow(ctx, "SELECT session_id FROM crypto_olm_session WHERE sender_key=$1 AND account_id=$2 LIMIT 1",
		key, s.AccountID).Scan(&sid)
	return err == nil && sid != ""
}

// GetSessions returns the olm sessions with key's device, the one that
// last decrypted first.
func (s olmStore) GetSessions(ctx context.Context, key id.SenderKey) (crypto.OlmSessionList, error) {
	rows, err := s.DB.Query(ctx, "SELECT session, created_at, last_encrypted, last_decrypted FROM crypto_olm_session WHERE sender_key=$1 AND account_id=$2 ORDER BY last_decrypted DESC",
		key, s.AccountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := crypto.OlmSessionList{}
	for rows.Next() {
		sess, err := s.scanSession(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, sess)
	}
	return list, rows.Err()
}

// GetLatestSession returns the olm session with key's device that last
// decrypted; nil when there is none.
func (s olmStore) GetLatestSession(ctx context.Context, key id.SenderKey) (*crypto.OlmSession, error) {
	row := s.DB.QueryRow(ctx, "SELECT session, created_at, last_encrypted, last_decrypted FROM crypto_olm_session WHERE sender_key=$1 AND account_id=$2 ORDER BY last_decrypted DESC LIMIT 1",
		key, s.AccountID)
	sess, err := s.scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return sess, err
}

// AddSession stores a new olm session with key's device.
func (s olmStore) AddSession(ctx context.Context, key id.SenderKey, session *crypto.OlmSession) error {
	pickled, err := session.Internal.Pickle(s.PickleKey)
	if err != nil {
		return err
	}
	_, err = s.DB.Exec(ctx, "INSERT INTO crypto_olm_session (session_id, sender_key, session, created_at, last_encrypted, last_decrypted, account_id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
		session.ID(), key, pickled, session.CreationTime, session.LastEncryptedTime, session.LastDecryptedTime, s.AccountID)
	return err
}

func (s olmStore) scanSession(row interface{ Scan(...any) error }) (*crypto.OlmSession, error) {
	sess := &crypto.OlmSession{Internal: olm.NewBlankSession()}
	var pickled []byte
	if err := row.Scan(&pickled, &sess.CreationTime, &sess.LastEncryptedTime, &sess.LastDecryptedTime); err != nil {
		return nil, err
	}
	if err := sess.Internal.Unpickle(pickled, s.PickleKey); err != nil {
		return nil, err
	}
	return sess, nil
}
