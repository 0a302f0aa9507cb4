package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Journal narrows the one window in which a part can be sent twice: the
// platform has taken it, and the process dies before the inbox records
// that. The pipeline writes to the journal the moment the platform
// answers, and only then, unless the journal's write was the inbox's
// record itself, to the inbox, which may wait on the database. At start,
// what the journal holds is applied to the inbox before anything is
// resumed. Implementations must be safe for concurrent use.
//
// Where one process serves the store (SQLite), the journal is a file
// (FileJournal): one write(2), which a killed process's kernel still
// completes, narrows the window to microseconds. Where several share it
// (PostgreSQL), a file would be seen only by its own process, while
// another takes the chat over: there the journal is the store itself
// (InboxJournal), which every process reads.
type Journal interface {
	// Sent records that the platform took the first n parts of item
	// seq (all of them when done). It reports whether that write was
	// itself the inbox's record, so the pipeline writes nothing more.
	Sent(ctx context.Context, seq int64, n int, done bool) (recorded bool, err error)
	// Recorded says the inbox now holds what Sent said of seq.
	Recorded(seq int64)
	// Replay calls apply for each item whose last Sent was not
	// recorded, then forgets them once every apply succeeded.
	Replay(ctx context.Context, apply func(seq int64, sent int, done bool) error) error
}

// InboxJournal is the journal kept in the inbox itself, for a store that
// several processes share: Sent records the parts in the inbox at once,
// where the process that takes a chat over after a crash sees them.
func InboxJournal(inbox Inbox) Journal { return inboxJournal{inbox} }

type inboxJournal struct{ inbox Inbox }

func (j inboxJournal) Sent(ctx context.Context, seq int64, n int, done bool) (bool, error) {
	var err error
	if done {
		err = j.inbox.Finish(ctx, seq, StateDone)
	} else {
		err = j.inbox.MarkSent(ctx, seq, n)
	}
	return err == nil, err
}

func (inboxJournal) Recorded(int64) {}

func (inboxJournal) Replay(context.Context, func(int64, int, bool) error) error { return nil }

// FileJournal is the journal in a file, for a store one process serves.
// It does not survive a power cut (nor does an unsynced database
// commit); it does survive SIGKILL, a crash and the out-of-memory
// killer. A nil *FileJournal keeps nothing.
type FileJournal struct {
	path string
	mu   sync.Mutex
	f    *os.File
	// open are the entries written whose inbox write is not known to be
	// done: what a compaction keeps.
	open map[int64]journalEntry
	size int64
}

type journalEntry struct {
	sent int
	done bool
}

// OpenJournal opens (creating) the journal at path.
func OpenJournal(path string) (*FileJournal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("delivery journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &FileJournal{path: path, f: f, open: map[int64]journalEntry{}, size: st.Size()}, nil
}

// OpenJournalIn opens the channel's journal in dir (beside the store),
// "sent-<channel>.journal", for the process's life; none for dir "" (a
// store in memory).
func OpenJournalIn(dir, channel string) (*FileJournal, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return OpenJournal(filepath.Join(dir, "sent-"+channel+".journal"))
}

// Close closes the journal's file.
func (j *FileJournal) Close() error { return j.f.Close() }

// compactAt is the size past which the journal is rewritten with only
// its open entries (a few lines: the parts taken that the inbox has not
// recorded yet). The next start applies every line it finds, one inbox
// write each, so the size bounds that work after a crash: at 1 MiB, tens
// of thousands of items already recorded; at 16 KiB, about a thousand,
// and the journal is rewritten about once in a thousand parts.
const compactAt = 16 << 10

// Sent appends a line saying the platform took the first n parts of
// item seq (all of them when done); it is never the inbox's record.
func (j *FileJournal) Sent(_ context.Context, seq int64, n int, done bool) (bool, error) {
	if j == nil {
		return false, nil
	}
	line := fmt.Sprintf("%d %d %t\n", seq, n, done)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.open[seq] = journalEntry{n, done}
	_, err := j.f.WriteString(line)
	j.size += int64(len(line))
	return false, err
}

// Recorded says the inbox now holds what the journal said of seq.
func (j *FileJournal) Recorded(seq int64) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.open, seq)
	if j.size > compactAt {
		j.rewrite()
	}
}

// compact rewrites the journal with only its open entries: a pipeline
// does so when it stops, so the next start has nothing to apply that the
// inbox holds already.
func (j *FileJournal) compact() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rewrite()
}

// rewrite replaces the file's contents with the open entries. j.mu is
// held.
func (j *FileJournal) rewrite() {
	var b bytes.Buffer
	for seq, e := range j.open {
		fmt.Fprintf(&b, "%d %d %t\n", seq, e.sent, e.done)
	}
	if err := j.f.Truncate(0); err != nil {
		return
	}
	n, _ := j.f.Write(b.Bytes())
	j.size = int64(n)
}

// Replay calls apply for each item's last line, then empties the journal
// once every apply succeeded.
func (j *FileJournal) Replay(_ context.Context, apply func(seq int64, sent int, done bool) error) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	raw, err := os.ReadFile(j.path)
	if err != nil {
		return err
	}
	last := map[int64]journalEntry{}
	var order []int64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 {
			continue // a line cut by the crash
		}
		seq, err1 := strconv.ParseInt(string(f[0]), 10, 64)
		n, err2 := strconv.Atoi(string(f[1]))
		done, err3 := strconv.ParseBool(string(f[2]))
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if _, ok := last[seq]; !ok {
			order = append(order, seq)
		}
		last[seq] = journalEntry{n, done}
	}
	for _, seq := range order {
		e := last[seq]
		if err := apply(seq, e.sent, e.done); err != nil {
			return err
		}
	}
	clear(j.open)
	j.rewrite()
	return nil
}
