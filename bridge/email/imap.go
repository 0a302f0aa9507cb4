package email

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/mail"

	"loadout/bridge"
	"loadout/chat"
)

// stateUID + the mailbox's name keeps "<uidvalidity>:<uid>": the last
// message of the mailbox that is handled (stored in the inbox and marked
// \Seen, or moved to the quarantine, or left alone). A restart resumes
// after it.
const stateUID = "email:uid:"

// errRefused: the IMAP server refused the account's credentials.
var errRefused = errors.New("the IMAP server refused email.username and email.password")

// readLoop reads the mailbox until ctx ends, connecting again after a
// failure with growing waits. It returns an error only when the server
// refuses the credentials.
func (a *Adapter) readLoop(ctx context.Context) error {
	b := a.patient("").New()
	for ctx.Err() == nil {
		start := time.Now()
		err := a.session(ctx)
		a.setReady(false)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRefused) {
			return err
		}
		if time.Since(start) > time.Minute {
			b.Reset() // it worked for a while: not a failure in a row
		}
		a.cfg.Observer.Retried("email")
		wait := b.Next()
		a.log.Warn("email: the IMAP connection ended; connecting again", "err", err, "wait", wait)
		if b.Wait(ctx, wait) != nil {
			return nil
		}
	}
	return nil
}

// session is one IMAP connection: log in, select the mailbox, then take
// new messages and wait for more (IDLE, or a poll every PollEvery) until
// the connection fails or ctx ends.
func (a *Adapter) session(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	opts := &imapclient.Options{
		TLSConfig: a.tlsConfig(a.imap),
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	c, err := a.connectIMAP(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.Login(a.cfg.Username, a.cfg.Password).Wait(); err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeNo {
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		return fmt.Errorf("email: log in: %w", err)
	}
	if err := c.Create(a.cfg.QuarantineMailbox, nil).Wait(); err != nil && !exists(err) {
		return fmt.Errorf("email: make email.quarantine_mailbox %q: %w", a.cfg.QuarantineMailbox, err)
	}
	sel, err := c.Select(a.cfg.Mailbox, nil).Wait()
	if err != nil {
		return fmt.Errorf("email: open email.mailbox %q: %w", a.cfg.Mailbox, err)
	}
	last, err := a.lastUID(ctx, sel.UIDValidity)
	if err != nil {
		return err
	}
	idle := c.Caps().Has(imap.CapIdle) || c.Caps().Has(imap.CapIMAP4rev2)
	a.log.Info("email connected", "mailbox", a.cfg.Mailbox, "idle", idle, "resume_after_uid", last)
	first := true
	for ctx.Err() == nil {
		n, err := a.takeNew(ctx, c, sel.UIDValidity, &last)
		if err != nil {
			return err
		}
		if first {
			first = false
			if n > 0 {
				a.log.Info("email: read back messages that arrived while disconnected", "messages", n)
			}
			if err := a.startPipeline(ctx); err != nil {
				return nil // ctx done
			}
			a.setReady(true)
		}
		if err := a.wait(ctx, c, idle, wake); err != nil {
			return err
		}
	}
	return nil
}

// connectIMAP dials the IMAP server and secures the connection: TLS
// from the start, or STARTTLS, which must be offered; plain only to a
// loopback address.
func (a *Adapter) connectIMAP(ctx context.Context, opts *imapclient.Options) (*imapclient.Client, error) {
	conn, err := a.dial(ctx, a.imap)
	if err != nil {
		return nil, err
	}
	if a.imap.mode != startTLS {
		c := imapclient.New(conn, opts)
		if err := c.WaitGreeting(); err != nil {
			c.Close()
			return nil, fmt.Errorf("email: IMAP greeting: %w", err)
		}
		return c, nil
	}
	c, err := imapclient.NewStartTLS(conn, opts)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("email: STARTTLS with %s (email.imap_url): %w", a.imap.addr, err)
	}
	return c, nil
}

func exists(err error) bool {
	var ie *imap.Error
	return errors.As(err, &ie) && (ie.Code == imap.ResponseCodeAlreadyExists || strings.Contains(strings.ToLower(ie.Text), "exist"))
}

// lastUID is the last handled UID kept for this mailbox, 0 when none
// is kept or the mailbox was rebuilt since (another UIDVALIDITY): every
// unseen message is then read again, and the inbox recognises those it
// stored by their Message-ID.
func (a *Adapter) lastUID(ctx context.Context, validity uint32) (imap.UID, error) {
	v, err := a.store.State(ctx, stateUID+a.cfg.Mailbox)
	if err != nil {
		return 0, fmt.Errorf("email: read the last UID: %w", err)
	}
	val, uid, ok := strings.Cut(v, ":")
	if !ok || val != strconv.FormatUint(uint64(validity), 10) {
		return 0, nil
	}
	n, _ := strconv.ParseUint(uid, 10, 32)
	return imap.UID(n), nil
}

// wait waits for the mailbox to change: in IDLE until the server says a
// message arrived (or PollEvery passes), or PollEvery then a NOOP.
func (a *Adapter) wait(ctx context.Context, c *imapclient.Client, idle bool, wake <-chan struct{}) error {
	t := time.NewTimer(a.cfg.PollEvery)
	defer t.Stop()
	if !idle {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := c.Noop().Wait(); err != nil {
			return fmt.Errorf("email: NOOP: %w", err)
		}
		return nil
	}
	cmd, err := c.Idle()
	if err != nil {
		return fmt.Errorf("email: IDLE: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	case <-c.Closed():
	}
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("email: end IDLE: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("email: IDLE: %w", err)
	}
	return nil
}

// takeNew takes the unseen messages after last, in UID order, and
// reports how many it took. Each is handled before last moves past it.
func (a *Adapter) takeNew(ctx context.Context, c *imapclient.Client, validity uint32, last *imap.UID) (int, error) {
	criteria := &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen, imap.FlagDeleted}}
	if *last > 0 {
		var set imap.UIDSet
		set.AddRange(*last+1, 0)
		criteria.UID = []imap.UIDSet{set}
	}
	found, err := c.UIDSearch(criteria, nil).Wait()
	if err != nil {
		return 0, fmt.Errorf("email: search the mailbox: %w", err)
	}
	var uids []imap.UID
	for _, u := range found.AllUIDs() {
		if u > *last { // "n:*" always holds the highest UID
			uids = append(uids, u)
		}
	}
	slices.Sort(uids)
	if len(uids) == 0 {
		return 0, nil
	}
	sizes, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return 0, fmt.Errorf("email: fetch the sizes of new messages: %w", err)
	}
	size := map[imap.UID]int64{}
	for _, m := range sizes {
		size[m.UID] = m.RFC822Size
	}
	for _, uid := range uids {
		if err := a.takeOne(ctx, c, uid, size[uid]); err != nil {
			return 0, err
		}
		*last = uid
		if err := a.store.SetState(ctx, stateUID+a.cfg.Mailbox, fmt.Sprintf("%d:%d", validity, uid)); err != nil {
			// The message is handled; a restart reads it again, and the
			// inbox recognises it.
			a.log.Warn("email: could not keep the last UID", "err", err)
		}
	}
	return len(uids), nil
}

// takeOne handles one new message: a message too large or unreadable,
// or whose sender is not authenticated, is moved to the quarantine; one
// that must not be answered is marked \Seen and left; any other is
// stored in the inbox, then marked \Seen. An error means the connection
// failed: the message is read again on the next.
func (a *Adapter) takeOne(ctx context.Context, c *imapclient.Client, uid imap.UID, size int64) error {
	set := imap.UIDSetNum(uid)
	if size > a.cfg.MaxMessage {
		return a.quarantine(c, uid, "", fmt.Sprintf("it is %d bytes, more than the %d read", size, a.cfg.MaxMessage))
	}
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return fmt.Errorf("email: fetch message %d: %w", uid, err)
	}
	if len(msgs) == 0 {
		return nil // expunged meanwhile
	}
	raw := msgs[0].FindBodySection(section)
	if int64(len(raw)) > a.cfg.MaxMessage {
		return a.quarantine(c, uid, "", fmt.Sprintf("it is %d bytes, more than the %d read", len(raw), a.cfg.MaxMessage))
	}
	l, mr, err := safely(func() (*letter, *mail.Reader, error) { return readHeader(raw) })
	if err != nil {
		return a.quarantine(c, uid, "", err.Error())
	}
	defer mr.Close()
	if l.from == a.self {
		a.log.Info("email: not answered: it is from the assistant's own address", "uid", uid, "message_id", l.id)
		return a.seen(c, uid)
	}
	if ok, why := authenticated(l.header, l.from, a.cfg.TrustedAuthservID); !ok {
		return a.quarantine(c, uid, l.from, "the sender is not authenticated: "+why)
	}
	if why := automatic(l.header, l.from, a.self); why != "" {
		a.log.Info("email: not answered: "+why, "from", l.from, "uid", uid, "message_id", l.id)
		return a.seen(c, uid)
	}
	if _, _, err := safely(func() (*letter, *mail.Reader, error) { return l, mr, readBody(l, mr) }); err != nil {
		return a.quarantine(c, uid, l.from, err.Error())
	}
	if err := a.receive(ctx, l, uid); err != nil {
		return err
	}
	return a.seen(c, uid)
}

// safely runs a parser, turning a panic in it into errBroken: a message
// that crashes the parser is quarantined, not read again at every start.
func safely(parse func() (*letter, *mail.Reader, error)) (l *letter, mr *mail.Reader, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, mr, err = nil, nil, fmt.Errorf("%w: the parser failed: %v", errBroken, r)
		}
	}()
	return parse()
}

// seen marks a message \Seen.
func (a *Adapter) seen(c *imapclient.Client, uid imap.UID) error {
	err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
	if err != nil {
		return fmt.Errorf("email: mark message %d seen: %w", uid, err)
	}
	return nil
}

// quarantine moves a message, unread, to the quarantine mailbox, and
// logs why: it is never answered.
func (a *Adapter) quarantine(c *imapclient.Client, uid imap.UID, from, why string) error {
	a.log.Warn("email: a message was moved to the quarantine and will not be answered", "why", why, "from", from,
		"uid", uid, "quarantine_mailbox", a.cfg.QuarantineMailbox)
	if _, err := c.Move(imap.UIDSetNum(uid), a.cfg.QuarantineMailbox).Wait(); err != nil {
		return fmt.Errorf("email: move message %d to the quarantine: %w", uid, err)
	}
	return nil
}

// receive hands an authenticated person's message to the pipeline: an
// allowed sender's, or, once, a refusal to anyone else. A sender past
// the rate limit is not answered. An error means it was not stored.
func (a *Adapter) receive(ctx context.Context, l *letter, uid imap.UID) error {
	ref := "message:" + l.id
	if l.id == "" {
		ref = fmt.Sprintf("uid:%d", uid)
	}
	if seen, err := a.pipe.Seen(ctx, ref); err != nil {
		return fmt.Errorf("email: %w", err)
	} else if seen {
		return nil // stored before a crash, or delivered twice
	}
	if !a.allow[l.from] {
		a.log.Warn("email sender refused: add their address to email.allowed_senders to allow them", "from", l.from, "message_id", l.id)
		if !a.firstRefusal(l.from) {
			return nil
		}
		if ok, err := a.withinLimit(ctx, l.from, ref); err != nil || !ok {
			return err
		}
	} else if ok, err := a.withinLimit(ctx, l.from, ref); err != nil {
		return err
	} else if !ok {
		a.log.Warn("email: not answered: the sender wrote more than email allows in an hour (a mail loop?)", "from", l.from,
			"per_hour", a.cfg.PerSenderHour, "message_id", l.id)
		return nil
	}
	root := l.root()
	if root == "" {
		root = ref
	}
	key := chatKey(l.from, root)
	r := route{To: l.from, Root: root, Subject: l.subject, InReplyTo: l.id, References: l.replyRefs()}
	_, err := a.pipe.Receive(ctx, ref, func() bridge.Pending {
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode()}
	}, func() (bridge.Pending, bool) {
		if !a.allow[l.from] {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key}, Route: r.encode(), Reply: bridge.TextRefused}, true
		}
		text := l.text()
		var notes []string
		for _, f := range l.files {
			notes = append(notes, a.keepFile(ctx, key, f))
		}
		if len(notes) > 0 {
			text = strings.TrimSpace(strings.Join(notes, "\n") + "\n" + text)
		}
		if text == "" {
			return bridge.Pending{}, false
		}
		return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: "email:" + l.from, Text: text}, Route: r.encode()}, true
	})
	if err != nil {
		return fmt.Errorf("email: store message %s: %w", l.id, err)
	}
	return nil
}

// withinLimit counts message ref of sender and reports whether it is
// within the sender's hourly limit. The count is the store's: it holds
// across the processes sharing the database, and a message read again
// (after a crash, or by the process that took the mailbox over) counts
// once. An error means it could not be counted: the message is read
// again on the next connection.
func (a *Adapter) withinLimit(ctx context.Context, sender, ref string) (bool, error) {
	ok, err := a.store.Hit(ctx, "email:"+sender, ref, a.cfg.PerSenderHour, time.Hour)
	if err != nil {
		return false, fmt.Errorf("email: count the sender's messages: %w", err)
	}
	return ok, nil
}

// firstRefusal reports whether a stranger is refused for the first time
// since the start.
func (a *Adapter) firstRefusal(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused[addr] {
		return false
	}
	a.refused[addr] = true
	return true
}
