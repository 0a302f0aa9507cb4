package email

import (
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-message/mail"
)

// automatic reports why a message must never be answered because a
// machine sent it, or "" when a person may have: an Auto-Submitted other
// than "no" (auto-replies, vacation notices, the assistant's own
// answers, RFC 3834), a mailing list's List-Id, Precedence bulk, list or
// junk, an empty Return-Path (a bounce), or a sender that is the
// assistant itself. Answering any of them can start a loop of two
// programs answering each other.
func automatic(h mail.Header, from, self string) string {
	if from == self {
		return "it is from the assistant's own address"
	}
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" {
		if v, _, _ = strings.Cut(v, ";"); strings.TrimSpace(v) != "no" {
			return "it is automatic (Auto-Submitted: " + v + ")"
		}
	}
	if h.Get("List-Id") != "" {
		return "it came through a mailing list (List-Id)"
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Precedence"))) {
	case "bulk", "list", "junk":
		return "it is bulk mail (Precedence: " + h.Get("Precedence") + ")"
	}
	if rp := strings.TrimSpace(h.Get("Return-Path")); rp == "<>" {
		return "it is a bounce (empty Return-Path)"
	}
	return ""
}

// rateLimit counts each sender's answered messages over a sliding
// window; one past the limit is not answered. It is safe for concurrent
// use.
type rateLimit struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string][]time.Time
}

func newRateLimit(max int, window time.Duration) *rateLimit {
	return &rateLimit{max: max, window: window, now: time.Now, seen: map[string][]time.Time{}}
}

// allow records a message of sender and reports whether it is within
// the limit.
func (r *rateLimit) allow(sender string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	kept := r.seen[sender][:0]
	for _, t := range r.seen[sender] {
		if now.Sub(t) < r.window {
			kept = append(kept, t)
		}
	}
	if len(kept) >= r.max {
		r.seen[sender] = kept
		return false
	}
	r.seen[sender] = append(kept, now)
	return true
}
