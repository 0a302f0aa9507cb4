package email

import (
	"strings"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/authres"
	"golang.org/x/net/publicsuffix"
)

// authenticated reports whether the message's From (one address, from)
// is vouched for by the operator's own mail server: among the
// Authentication-Results headers, only those whose authserv-id is
// trusted count (the server must remove any such header that came with
// the message; Postfix with OpenDMARC, rspamd and Dovecot's filters do),
// and one of them must say dmarc=pass for the From domain, or dkim=pass
// for a domain aligned with it (the same organisational domain), and
// none may say dmarc=fail: a header of the trusted id that the sender
// wrote, and the server failed to remove, is outvoted by the server's
// own verdict. why says, for the log, what was missing.
func authenticated(h mail.Header, from, trusted string) (ok bool, why string) {
	_, domain, found := strings.Cut(from, "@")
	if !found || trusted == "" {
		return false, "no trusted authserv-id is configured"
	}
	why = "no Authentication-Results header of " + trusted
	passed := false
	for _, v := range h.Values("Authentication-Results") {
		id, results, err := authres.Parse(v)
		if err != nil || !strings.EqualFold(strings.TrimSpace(id), trusted) {
			continue
		}
		if !passed {
			why = "the Authentication-Results of " + trusted + " show no dmarc=pass or aligned dkim=pass"
		}
		for _, r := range results {
			switch r := r.(type) {
			case *authres.DMARCResult:
				switch {
				case r.Value == authres.ResultFail:
					// The server's own verdict: a second header of the
					// same id saying pass was written by someone else.
					return false, "the Authentication-Results of " + trusted + " say dmarc=fail"
				case r.Value == authres.ResultPass && (r.From == "" || strings.EqualFold(r.From, domain)):
					passed = true
				}
			case *authres.DKIMResult:
				if r.Value == authres.ResultPass && aligned(signer(r), domain) {
					passed = true
				}
			}
		}
	}
	if passed {
		return true, ""
	}
	return false, why
}

// signer is the domain a DKIM result names: header.d, else the domain
// of header.i.
func signer(r *authres.DKIMResult) string {
	if r.Domain != "" {
		return r.Domain
	}
	_, d, _ := strings.Cut(r.Identifier, "@")
	return d
}

// aligned reports relaxed DMARC alignment: the two domains have the same
// organisational domain (by the public suffix list).
func aligned(d, from string) bool {
	d, from = strings.ToLower(strings.TrimSuffix(d, ".")), strings.ToLower(strings.TrimSuffix(from, "."))
	if d == "" || from == "" {
		return false
	}
	if d == from {
		return true
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	of, err2 := publicsuffix.EffectiveTLDPlusOne(from)
	return err1 == nil && err2 == nil && od == of
}
