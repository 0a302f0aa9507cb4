package email

import (
	"strings"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/authres"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// authenticated reports whether the message's From (one address, from)
// is vouched for by the operator's own mail server. Only the topmost
// Authentication-Results header is read: each server a message passes
// puts its own above those it found (RFC 8601), so the topmost is the
// one the receiving server added, and every header below it came with
// the message, whatever authserv-id it names. It counts only when its
// authserv-id is the trusted one and it says dmarc=pass with header.from
// the From domain, or dkim=pass for a domain aligned with it (the same
// organisational domain), and not dmarc=fail. why says, for the log,
// what was missing.
func authenticated(h mail.Header, from, trusted string) (ok bool, why string) {
	at := strings.LastIndexByte(from, '@')
	if at < 0 || trusted == "" {
		return false, "no trusted authserv-id is configured"
	}
	domain := from[at+1:]
	headers := h.Values("Authentication-Results") // in the message's order, topmost first
	if len(headers) == 0 {
		return false, "no Authentication-Results header of " + trusted
	}
	id, results, err := authres.Parse(headers[0])
	if err != nil || !strings.EqualFold(strings.TrimSpace(id), trusted) {
		return false, "the topmost Authentication-Results header is not of " + trusted + " (the headers below it are not believed)"
	}
	passed := false
	why = "the Authentication-Results of " + trusted + " show no dmarc=pass or aligned dkim=pass"
	for _, r := range results {
		switch r := r.(type) {
		case *authres.DMARCResult:
			switch {
			case r.Value == authres.ResultFail:
				return false, "the Authentication-Results of " + trusted + " say dmarc=fail"
			case r.Value == authres.ResultPass && r.From == "":
				why = "the Authentication-Results of " + trusted + " say dmarc=pass for no domain (no header.from)"
			case r.Value == authres.ResultPass && sameDomain(r.From, domain):
				passed = true
			case r.Value == authres.ResultPass:
				why = "the Authentication-Results of " + trusted + " say dmarc=pass for another domain (header.from=" + r.From + ")"
			}
		case *authres.DKIMResult:
			if r.Value == authres.ResultPass && aligned(signer(r), domain) {
				passed = true
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

// domainName is d as domains are compared: in lower case, without a
// final dot, an internationalised name in its ASCII form (where it has
// one).
func domainName(d string) string {
	d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
	if a, err := idna.Lookup.ToASCII(d); err == nil {
		return a
	}
	return d
}

// sameDomain reports whether a and b name the same domain.
func sameDomain(a, b string) bool {
	a, b = domainName(a), domainName(b)
	return a != "" && a == b
}

// aligned reports relaxed DMARC alignment: the two domains have the same
// organisational domain (by the public suffix list).
func aligned(d, from string) bool {
	d, from = domainName(d), domainName(from)
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
