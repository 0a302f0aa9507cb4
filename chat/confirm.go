package chat

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"loadout/tools"
)

// Sentences of the approval flow.
const (
	msgNoApproval    = "There is no request of mine waiting for your answer here."
	msgNoSuchCode    = "There is no request #%s of mine here. Send /status to see what waits for your answer."
	msgNotYours      = "Only the person who asked for this can approve or deny it."
	msgAlready       = "That request was already answered."
	msgExpired       = "That request expired before it was answered, so nothing was done. Ask me again if you still want it."
	msgCancelled     = "That request belonged to a conversation that was cleared, so nothing was done."
	codeDenied       = "denied"
	codeExpired      = "expired"
	codeInterrupted  = "interrupted"
	codeOneAtATime   = "one_at_a_time"
	codeChanged      = "changed_since_approved"
	defaultConfirmIn = 10 * time.Minute
)

// gate holds, in the executor, every call the policy says the person must
// approve: it does not run, and its result carries the summary the person
// will read. An approved call passes when its arguments still say what
// was approved; an unattended turn is refused.
func (e *Engine) gate(ctx context.Context, d tools.Definition, c tools.Call, in tools.Input) (tools.Result, bool) {
	caller := tools.CallerFrom(ctx)
	if caller.Approved == c.ID && c.ID != "" {
		if s := tools.Summary(ctx, d, in); s != caller.ApprovedSummary {
			te := &tools.Error{Code: codeChanged,
				Message:    fmt.Sprintf("Not done: what this would do has changed since the person approved it. Approved: %s. Now: %s.", caller.ApprovedSummary, s),
				Suggestion: "Tell the person; they can ask again if they still want it."}
			return tools.Result{Status: tools.StatusError, Code: te.Code, Content: te.JSON()}, true
		}
		return tools.Result{}, false
	}
	if !e.cfg.Confirm.Needs(ctx, d, in.Value, caller.Tainted) {
		return tools.Result{}, false
	}
	summary := tools.Summary(ctx, d, in)
	if caller.Unattended {
		te := &tools.Error{Code: tools.CodeNeedsConfirmation,
			Message:    fmt.Sprintf("Not done: %s needs the person's approval, and nobody is there to give it in a scheduled run. (%s)", d.Name, summary),
			Suggestion: "Do not try it another way. In your answer, tell the person what you would have done, so they can ask for it themselves."}
		return tools.Result{Status: tools.StatusError, Code: te.Code, Content: te.JSON()}, true
	}
	return tools.Result{Status: tools.StatusPending, Content: summary}, true
}

// holdRound turns the round's held call (at most one: any other is
// refused, one at a time) into an approval and the question that ends
// the turn. It reports the approval, or nil when nothing was held. The
// approval stores the call's arguments as checked and decoded, the form
// its summary was built from.
func (t *turn) holdRound(results []tools.Result) *Approval {
	var a *Approval
	for i, r := range results {
		if r.Status != tools.StatusPending {
			continue
		}
		if a != nil {
			te := &tools.Error{Code: codeOneAtATime,
				Message:    "Not done: another action in this response is waiting for the person's approval; only one is asked at a time.",
				Suggestion: "Wait for the person's answer to the first, then call this again."}
			results[i] = tools.Result{CallID: r.CallID, Name: r.Name, Status: tools.StatusError, Code: te.Code, Content: te.JSON()}
			continue
		}
		ttl := t.e.cfg.ConfirmTTL
		a = &Approval{
			ID: newApprovalID(), ChatKey: t.in.ChatKey, SessionID: t.sess.ID, UserKey: t.in.UserKey,
			CallID: r.CallID, Tool: r.Name, Arguments: r.Input, Summary: r.Content, Tainted: t.tainted,
			Status: ApprovalPending, ExpiresAt: time.Now().Add(ttl),
		}
		pending, _ := json.Marshal(struct {
			Status     string `json:"status"`
			Message    string `json:"message"`
			Suggestion string `json:"suggestion"`
		}{"pending_approval", "Waiting for the person to approve: " + a.Summary,
			"Do not call it again. The person has been asked; its result arrives when they answer."})
		results[i].Content = string(pending)
	}
	return a
}

// question is what the person reads when a call waits for them.
func question(a Approval, ttl time.Duration) string {
	return fmt.Sprintf("I need your approval first:\n%s\n\nThis request expires in %s; until then nothing is done.", a.Summary, humanDuration(ttl))
}

func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute:
		return plural(int(d.Round(time.Minute)/time.Minute), "minute")
	}
	return plural(int(d.Round(time.Second)/time.Second), "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// idAlphabet spells approval ids: lower-case letters and digits without
// the ones people confuse (l, 1, o, 0).
const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// codeLen is how much of an approval's id is its code.
const codeLen = 4

// newApprovalID is a random id of 16 characters (80 bits); its first
// four are the code a person types.
func newApprovalID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b[:])
}

// CodeOf is the short code of approval id that binds a person's answer to
// its question: "#k7f2". It is shown with the question and its buttons,
// and never to the model (neither the id nor the code is in anything the
// model reads), so a text the model writes cannot quote it.
func CodeOf(id string) string {
	if len(id) > codeLen {
		id = id[:codeLen]
	}
	return "#" + id
}

// Decide answers an approval from the chat in in: approve runs the held
// call with its stored arguments, deny records the refusal; either way
// the turn carries on and the model answers. ref names the approval: its
// id (a button's) or its code ("#k7f2"). A bare answer (ref "") acts
// only when exactly one approval of this person waits in the chat and
// its question is the last thing said in the conversation; otherwise
// nothing is decided and the reply lists what waits, each with its code,
// so that a question the model wrote cannot borrow a bare /approve. Only
// the person who asked may answer; an approval runs at most once, and
// not after it expired or the conversation was cleared.
func (e *Engine) Decide(ctx context.Context, in Inbound, ref string, approve bool) (Reply, error) {
	ref = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ref), "#"))
	if ref == "" {
		id, reply, err := e.bare(ctx, in, approve)
		if id == "" || err != nil {
			return reply, err
		}
		ref = id
	}
	if strings.Trim(ref, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || len(ref) < codeLen {
		return Reply{Text: fmt.Sprintf(msgNoSuchCode, ref)}, nil
	}
	a, err := e.store.Approval(ctx, in.ChatKey, ref)
	if errors.Is(err, ErrNotFound) {
		return Reply{Text: fmt.Sprintf(msgNoSuchCode, ref)}, nil
	}
	if err != nil {
		return Reply{}, fmt.Errorf("read approval %s: %w", ref, err)
	}
	if a.UserKey != in.UserKey {
		return Reply{Text: msgNotYours}, nil
	}
	word := "Approved"
	if !approve {
		word = "Denied"
	}
	note := Inbound{ChatKey: in.ChatKey, UserKey: in.UserKey, ID: in.ID, Resume: in.Resume, OnText: in.OnText,
		Text: fmt.Sprintf("(%s: %s)", word, a.Summary), Tainted: a.Tainted}
	mine := a.DecidedBy == in.ID && in.ID != ""
	switch {
	case a.Status == ApprovalPending:
		to := ApprovalDenied
		switch {
		case time.Now().After(a.ExpiresAt):
			to = ApprovalExpired
		case approve:
			to = ApprovalRunning
		}
		var settings tools.Settings
		if to == ApprovalRunning {
			// Read before the call is marked running: a tool disabled in
			// the chat since it asked does not run.
			if settings, err = e.settings(ctx, a.ChatKey); err != nil {
				return Reply{}, err
			}
		}
		ok, err := e.store.Decide(ctx, a.ID, ApprovalPending, to, in.ID)
		if err != nil {
			return Reply{}, fmt.Errorf("decide approval %s: %w", a.ID, err)
		}
		if !ok {
			return Reply{Text: msgAlready}, nil
		}
		a.Status = to
		if to == ApprovalRunning {
			res := e.runApproved(ctx, a, settings.Disabled)
			m := Message{Role: RoleTool, Text: res.Content, Status: res.Status, Code: res.Code}
			if res.Personal {
				m.UserKey = a.UserKey
			}
			if err := e.resolve(ctx, a, m); err != nil {
				return Reply{}, err
			}
			if _, err := e.store.Decide(context.WithoutCancel(ctx), a.ID, ApprovalRunning, ApprovalDone, in.ID); err != nil {
				return Reply{}, err
			}
			// What the approved call returned is read by the turn it
			// carries on, like any result of that turn.
			note.Tainted = note.Tainted || res.Untrusted
			return e.Handle(ctx, note)
		}
	case mine && a.Status == ApprovalRunning:
		// This event approved it and was cut while the call ran: whether
		// it went through is unknown, and it is not run twice.
		if err := e.resolve(ctx, a, failed(codeInterrupted, "The approved action was interrupted by a restart; it may or may not have happened.",
			"Tell the person it was interrupted and ask them to check before asking again.")); err != nil {
			return Reply{}, err
		}
		if _, err := e.store.Decide(ctx, a.ID, ApprovalRunning, ApprovalDone, in.ID); err != nil {
			return Reply{}, err
		}
		return e.Handle(ctx, note)
	case mine && a.Status == ApprovalDone:
		// Answered and run; the turn carries on. What the call returned
		// is not read again to ask whether it was untrusted: the tool's
		// declaration decides, as for a resumed turn.
		note.Tainted = note.Tainted || e.untrustedTool(a.Tool)
		return e.Handle(ctx, note)
	case mine:
	default:
		why, _ := ended(a)
		return Reply{Text: why}, nil
	}
	// Denied or expired by this event, now or by an earlier try of it
	// that stopped before the outcome was recorded: recording it again
	// is harmless, and the answer is the same both times.
	if a.Status == ApprovalExpired {
		err := e.resolve(ctx, a, failed(codeExpired, "The person did not answer in time, so this was not done: "+a.Summary,
			"If it is still wanted, the person can ask again."))
		return Reply{Text: msgExpired}, err
	}
	if err := e.resolve(ctx, a, failed(codeDenied, "The person denied this, so it was not done: "+a.Summary,
		"Do not try it again unless the person asks.")); err != nil {
		return Reply{}, err
	}
	return e.Handle(ctx, note)
}

// bare picks the approval a bare /approve or /deny answers: the one
// approval of this person waiting in the chat, when its question is the
// last thing said in the conversation. Otherwise id is "" and reply says
// what waits.
func (e *Engine) bare(ctx context.Context, in Inbound, approve bool) (id string, reply Reply, err error) {
	pending, err := e.store.PendingApprovals(ctx, in.ChatKey)
	if err != nil {
		return "", Reply{}, fmt.Errorf("read approvals of %s: %w", in.ChatKey, err)
	}
	var mine []Approval
	for _, a := range pending {
		if a.UserKey == in.UserKey {
			mine = append(mine, a)
		}
	}
	if len(mine) == 0 {
		return "", Reply{Text: msgNoApproval}, nil
	}
	if len(mine) == 1 {
		last, err := e.lastAsked(ctx, in.ChatKey)
		if err != nil {
			return "", Reply{}, err
		}
		if last == mine[0].ID {
			return last, Reply{}, nil
		}
	}
	verb, done := "approve", "approved"
	if !approve {
		verb, done = "deny", "denied"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Nothing was %s: I can't be sure which request you mean. Waiting for your answer:", done)
	for _, a := range mine {
		fmt.Fprintf(&b, "\n%s — %s", CodeOf(a.ID), a.Summary)
	}
	fmt.Fprintf(&b, "\n\nAnswer /%s %s (with the code of the request you mean).", verb, CodeOf(mine[0].ID))
	return "", Reply{Text: b.String()}, nil
}

// lastAsked is the approval whose question is the last thing said in the
// chat's conversation, or "" when something was said after it.
func (e *Engine) lastAsked(ctx context.Context, chatKey string) (string, error) {
	sess, err := e.store.OpenSession(ctx, chatKey)
	if err != nil {
		return "", fmt.Errorf("open session for %s: %w", chatKey, err)
	}
	recent, err := e.store.Recent(ctx, sess.ID, 16)
	if err != nil {
		return "", fmt.Errorf("read history of session %d: %w", sess.ID, err)
	}
	for i := len(recent) - 1; i >= 0; i-- {
		if recent[i].Role == RoleAssistant {
			return askOf(recent[i]), nil
		}
	}
	return "", nil
}

// runApproved runs an approved call with its stored arguments, through
// the executor and its middleware, as the person who asked; the gate
// lets it through only if its arguments still say what was approved.
func (e *Engine) runApproved(ctx context.Context, a Approval, disabled map[string]bool) tools.Result {
	tctx := tools.WithCaller(ctx, tools.Caller{ChatKey: a.ChatKey, UserKey: a.UserKey, SessionID: a.SessionID,
		Disabled: disabled, Approved: a.CallID, ApprovedSummary: a.Summary})
	return e.exec.Run(tctx, nil, []tools.Call{{ID: a.CallID, Name: a.Tool, Arguments: a.Arguments}})[0]
}

// resolve records a held call's outcome that is not a run.
func (e *Engine) resolve(ctx context.Context, a Approval, m Message) error {
	m.Tokens = e.countMessage(m)
	if err := e.store.Resolve(context.WithoutCancel(ctx), a.SessionID, a.CallID, m); err != nil {
		return fmt.Errorf("record the outcome of approval %s: %w", a.ID, err)
	}
	e.cache.drop(a.SessionID)
	return nil
}

func failed(code, message, suggestion string) Message {
	te := &tools.Error{Code: code, Message: message, Suggestion: suggestion}
	return Message{Role: RoleTool, Text: te.JSON(), Status: tools.StatusError, Code: code}
}

// askOf is the approval id an assistant message asks for, if any.
func askOf(m Message) string {
	if m.Role == RoleAssistant {
		return m.Ask
	}
	return ""
}

// Answerable is whether a person may answer an approval now.
type Answerable struct {
	// OK: the request waits for this person's answer.
	OK bool
	// Why says, for the person, why not.
	Why string
	// Ended is set when the request is over (expired, answered or
	// cleared): its question can say so and lose its buttons. A request
	// that is someone else's, or unknown, is not ended: its question
	// stays as it is for its owner.
	Ended bool
}

// Answerable reports, before a button press is taken, whether userKey may
// answer approval id of chatKey: a channel refuses a press that may not,
// with Why, and changes nothing others see unless the request Ended.
func (e *Engine) Answerable(ctx context.Context, chatKey, userKey, id string) (Answerable, error) {
	a, err := e.store.Approval(ctx, chatKey, id)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && a.ID != id):
		return Answerable{Why: msgNoApproval}, nil
	case err != nil:
		return Answerable{}, fmt.Errorf("read approval %s: %w", id, err)
	case a.UserKey != userKey:
		return Answerable{Why: msgNotYours}, nil
	}
	if why, over := ended(a); over {
		return Answerable{Why: why, Ended: true}, nil
	}
	return Answerable{OK: true}, nil
}

// ended reports whether a can no longer be answered, and why, for the
// person: expired (by its time, even if not marked yet), cleared, or
// answered.
func ended(a Approval) (why string, over bool) {
	switch {
	case a.Status == ApprovalPending && time.Now().After(a.ExpiresAt), a.Status == ApprovalExpired:
		return msgExpired, true
	case a.Status == ApprovalCancelled:
		return msgCancelled, true
	case a.Status != ApprovalPending:
		return msgAlready, true
	}
	return "", false
}
