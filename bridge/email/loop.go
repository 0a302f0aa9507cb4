package email

import (
	"strings"

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
