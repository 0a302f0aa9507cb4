package chat

import (
	"context"
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
	codeDeniedByRule = "denied_by_rule"
	msgNoAlways      = "Request %s cannot be always allowed: it reaches nothing narrower than the whole tool. Answer /approve %s to allow it this once."
	defaultConfirmIn = 10 * time.Minute
)

// holdRound turns the round's held calls into approvals, asked together
// in one question and decided one by one. It returns them, or nil when
// nothing was held. Each approval stores its call's arguments as checked
// and decoded, the form its summary was built from.
func (t *turn) holdRound(results []tools.Result) []Approval {
	var asks []Approval
	ttl := t.e.cfg.ConfirmTTL
	for i, r := range results {
		if r.Status != tools.StatusPending {
			continue
		}
		a := Approval{
			ID: newApprovalID(), ChatKey: t.in.chat(), SessionID: t.sess.ID, UserKey: t.in.UserKey, Delegate: t.delegation(),
			CallID: r.CallID, Tool: r.Name, Arguments: r.Input, Summary: r.Content, Tainted: t.tainted,
			Status: ApprovalPending, ExpiresAt: time.Now().Add(ttl), Offer: r.Offer,
		}
		if r.Reach != nil {
			a.Reach, a.Unknown = r.Reach.String(), r.Reach.Unknown
		}
		if len(asks) > 0 {
			a.Batch = asks[0].ID
		} else {
			a.Batch = a.ID
		}
		asks = append(asks, a)
		pending, _ := json.Marshal(struct {
			Status     string `json:"status"`
			Message    string `json:"message"`
			Suggestion string `json:"suggestion"`
		}{"pending_approval", "Waiting for the person to approve: " + a.Summary,
			"Do not call it again. The person has been asked; its result arrives when they answer."})
		results[i].Content = string(pending)
	}
	return asks
}

// askReply is the reply that asks for asks: one question, or for several
// an opening line and each one's own question, so each can be approved
// or denied on its own.
func askReply(asks []Approval, ttl time.Duration, unattended bool) Reply {
	lead := "I need your approval first:"
	if unattended {
		lead = "Your scheduled task needs your approval first:"
	}
	if len(asks) == 1 {
		a := asks[0]
		return Reply{Text: fmt.Sprintf("%s\n%s%s\n\nThis request expires in %s; until then nothing is done.", lead, a.Summary, alwaysLine(a), humanDuration(ttl)),
			Ask: a.ID, Asks: []Asked{{ID: a.ID, Always: alwaysOf(a)}}}
	}
	r := Reply{Ask: asks[0].ID,
		Text: fmt.Sprintf("%s %d actions wait for your answer, each on its own: approve the ones you want and deny the others. They expire in %s; until then nothing is done.",
			strings.TrimSuffix(lead, " first:")+":", len(asks), humanDuration(ttl))}
	for i, a := range asks {
		r.Asks = append(r.Asks, Asked{ID: a.ID, Text: fmt.Sprintf("%d of %d: %s%s", i+1, len(asks), a.Summary, alwaysLine(a)), Always: alwaysOf(a)})
	}
	return r
}

// alwaysOf is the scope an approval's "Always allow" takes, as a person
// reads it; "" when none is offered.
func alwaysOf(a Approval) string {
	if a.Offer == nil {
		return ""
	}
	return a.Offer.String()
}

// alwaysLine shows, with the question, what "Always allow" would allow,
// before anyone takes it.
func alwaysLine(a Approval) string {
	if len(a.Unknown) > 0 {
		return fmt.Sprintf("\n(I cannot tell everything this reaches — %s — so no rule can allow it without asking.)", strings.Join(a.Unknown, "; "))
	}
	if a.Offer == nil {
		return ""
	}
	return fmt.Sprintf("\n(\"Always allow\" would let me do this without asking from now on: %s.)", a.Offer)
}

// questionText is the whole question as the conversation records it.
func questionText(r Reply) string {
	if len(r.Asks) == 1 && r.Asks[0].Text == "" {
		return r.Text
	}
	var b strings.Builder
	b.WriteString(r.Text)
	for _, a := range r.Asks {
		b.WriteString("\n\n")
		b.WriteString(a.Text)
	}
	return b.String()
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

// codeLen is how much of an approval's id is its code.
const codeLen = 4

// newApprovalID is a random id of 16 characters (80 bits); its first
// four are the code a person types.
func newApprovalID() string { return tools.RandomCode(16) }

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
// the turn carries on and the model answers, once every call asked in
// the same question is decided. ref names the approval: its id (a
// button's) or its code ("#k7f2"). A bare answer (ref "") acts only when
// exactly one approval of this person waits in the chat and its question
// is the last thing said in the conversation; otherwise nothing is
// decided and the reply lists what waits, each with its code, so that a
// question the model wrote cannot borrow a bare /approve. Only the
// person who asked may answer; an approval runs at most once, and not
// after it expired or the conversation was cleared.
func (e *Engine) Decide(ctx context.Context, in Inbound, ref string, approve bool) (Reply, error) {
	return e.decide(ctx, in, ref, approve, false)
}

// Always approves like Decide and keeps the person's rule the question
// offered ("Always allow", Approval.Offer), so that calls within its
// scope no longer ask them. A request with no offer is not approved.
func (e *Engine) Always(ctx context.Context, in Inbound, ref string) (Reply, error) {
	return e.decide(ctx, in, ref, true, true)
}

func (e *Engine) decide(ctx context.Context, in Inbound, ref string, approve, always bool) (Reply, error) {
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
		if always && to == ApprovalRunning && a.Offer == nil {
			return Reply{Text: fmt.Sprintf(msgNoAlways, CodeOf(a.ID), CodeOf(a.ID))}, nil
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
		if always && to == ApprovalRunning {
			rule := tools.Rule{Code: tools.NewRuleCode(), Owner: a.UserKey, Scope: *a.Offer, Decision: tools.RuleAllow}
			if err := e.store.AddRule(context.WithoutCancel(ctx), rule); err != nil {
				return Reply{}, fmt.Errorf("keep the rule of %s: %w", a.UserKey, err)
			}
		}
		if to == ApprovalRunning {
			res := e.runApproved(ctx, a, settings.Disabled)
			m := Message{Role: RoleTool, Text: res.Content, Status: res.Status, Code: res.Code}
			if res.Personal {
				m.UserKey = a.UserKey
			}
			if err := e.resolve(ctx, a, m, e.entry(a, AuditApproved, in.UserKey, outcome(res))); err != nil {
				return Reply{}, err
			}
			if _, err := e.store.Decide(context.WithoutCancel(ctx), a.ID, ApprovalRunning, ApprovalDone, in.ID); err != nil {
				return Reply{}, err
			}
			a.Status = ApprovalDone
			// What the approved call returned is read by the turn it
			// carries on, like any result of that turn.
			return e.carryOn(ctx, in, a, res.Untrusted)
		}
	case mine && a.Status == ApprovalRunning:
		// This event approved it and was cut while the call ran: whether
		// it went through is unknown, and it is not run twice.
		if err := e.resolve(ctx, a, failed(codeInterrupted, "The approved action was interrupted by a restart; it may or may not have happened.",
			"Tell the person it was interrupted and ask them to check before asking again."), e.entry(a, AuditApproved, in.UserKey, "interrupted")); err != nil {
			return Reply{}, err
		}
		if _, err := e.store.Decide(ctx, a.ID, ApprovalRunning, ApprovalDone, in.ID); err != nil {
			return Reply{}, err
		}
		a.Status = ApprovalDone
		return e.carryOn(ctx, in, a, false)
	case mine && a.Status == ApprovalDone:
		// Answered and run; the turn carries on. What the call returned
		// is not read again to ask whether it was untrusted: the tool's
		// declaration decides, as for a resumed turn.
		return e.carryOn(ctx, in, a, e.untrustedTool(a.Tool))
	case mine:
	default:
		why, _ := ended(a)
		return Reply{Text: why}, nil
	}
	// Denied or expired by this event, now or by an earlier try of it
	// that stopped before the outcome was recorded: recording it again
	// is harmless, and the answer is the same both times.
	if a.Status == ApprovalExpired {
		err := e.resolve(ctx, a, expiredResult(a), e.entry(a, AuditExpired, "", ""))
		return Reply{Text: msgExpired}, err
	}
	if err := e.resolve(ctx, a, failed(codeDenied, "The person denied this, so it was not done: "+a.Summary,
		"Do not try it again unless the person asks."), e.entry(a, AuditDenied, in.UserKey, "")); err != nil {
		return Reply{}, err
	}
	return e.carryOn(ctx, in, a, false)
}

func expiredResult(a Approval) Message {
	return failed(codeExpired, "The person did not answer in time, so this was not done: "+a.Summary,
		"If it is still wanted, the person can ask again.")
}

// carryOn goes on with the turn a decided approval belongs to, once
// every call asked with it is decided: until then it says what still
// waits. The turn that carries on inherits the asking turn's taint, and
// reads what the approved calls returned (untrusted: this one's result
// was untrusted content).
func (e *Engine) carryOn(ctx context.Context, in Inbound, a Approval, untrusted bool) (Reply, error) {
	batch := []Approval{a}
	if a.Batch != "" {
		var err error
		if batch, err = e.store.Batch(ctx, a.ChatKey, a.Batch); err != nil {
			return Reply{}, fmt.Errorf("read the approvals asked with %s: %w", a.ID, err)
		}
	}
	var waiting []Approval
	for _, b := range batch {
		if b.Status == ApprovalPending && !time.Now().After(b.ExpiresAt) {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s", decidedWord(a.Status), a.Summary)
		b.WriteString("\n\nStill waiting for your answer:")
		for _, w := range waiting {
			fmt.Fprintf(&b, "\n%s — %s", CodeOf(w.ID), w.Summary)
		}
		return Reply{Text: b.String()}, nil
	}
	tainted := untrusted
	var said []string
	for _, b := range batch {
		if b.Status == ApprovalPending {
			// Its time ran out while the others were answered.
			ok, err := e.store.Decide(ctx, b.ID, ApprovalPending, ApprovalExpired, in.ID)
			if err != nil {
				return Reply{}, fmt.Errorf("expire approval %s: %w", b.ID, err)
			}
			if ok {
				b.Status = ApprovalExpired
				if err := e.resolve(ctx, b, expiredResult(b), e.entry(b, AuditExpired, "", "")); err != nil {
					return Reply{}, err
				}
			}
		}
		if b.ID == a.ID {
			b.Status = a.Status
		} else if b.Status == ApprovalDone && e.untrustedTool(b.Tool) {
			tainted = true
		}
		tainted = tainted || b.Tainted
		said = append(said, decidedWord(b.Status)+": "+b.Summary)
	}
	note := Inbound{ChatKey: in.ChatKey, UserKey: in.UserKey, ID: in.ID, Resume: in.Resume, OnText: in.OnText,
		Text: "(" + strings.Join(said, "; ") + ")", Tainted: tainted}
	if a.Delegate != "" {
		// A sub-agent's call: its turn carries on, not the chat's.
		return e.carryOnDelegate(ctx, in, a, note)
	}
	return e.Handle(ctx, note)
}

// decidedWord is how the note that carries a turn on names a decision.
func decidedWord(status string) string {
	switch status {
	case ApprovalDone, ApprovalRunning:
		return "Approved"
	case ApprovalExpired:
		return "Expired"
	case ApprovalCancelled:
		return "Cancelled"
	}
	return "Denied"
}

// entry is the audit trail's record of a decision on a.
func (e *Engine) entry(a Approval, decision, by, outcome string) AuditEntry {
	return AuditEntry{ChatKey: a.ChatKey, UserKey: a.UserKey, SessionID: a.SessionID, CallID: a.CallID, Tool: a.Tool,
		Summary: a.Summary, Reach: a.Reach, ArgsHash: argsHash(a.Arguments), Tainted: a.Tainted, Decision: decision, DecidedBy: by, Outcome: outcome}
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

// resolve records a held call's outcome, and the decision in the audit
// trail.
func (e *Engine) resolve(ctx context.Context, a Approval, m Message, entry AuditEntry) error {
	m.Tokens = e.countMessage(m)
	if err := e.store.Resolve(context.WithoutCancel(ctx), a.SessionID, a.CallID, m, entry); err != nil {
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
