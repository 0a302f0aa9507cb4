package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"loadout/chat"
)

var errNotFound = chat.ErrNotFound

// kindError is a database error tagged with the kind callers test for
// (chat.ErrNotFound, chat.ErrTransient); its text is the database's.
type kindError struct {
	kind, err error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// kind tags err with its kind: a missing record is chat.ErrNotFound; a
// busy or locked database, or a deadline, is chat.ErrTransient. Other
// errors are returned unchanged.
func kind(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return &kindError{chat.ErrNotFound, err}
	case busy(err), pgTransient(err):
		return &kindError{chat.ErrTransient, err}
	case errors.Is(err, context.DeadlineExceeded):
		return &kindError{chat.ErrTransient, err}
	}
	return err
}

// duplicate reports whether err is the refusal of a row a unique index
// already holds, by either database.
func duplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" || sqliteDuplicate(err)
}
