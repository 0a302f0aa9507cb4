package whatsapp

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"loadout/config"
)

// Digits is a phone number in the form WhatsApp's webhooks give it: its
// digits alone, without "+", spaces, dashes, dots or brackets
// ("+1 (555) 123-4567" is "15551234567"), and without a leading "00"
// international prefix. It is "" when what is left is not 7 to 15
// digits (E.164's longest), or holds anything else.
func Digits(number string) string {
	var b strings.Builder
	for _, c := range strings.TrimSpace(number) {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == '+' && b.Len() == 0, c == ' ', c == '-', c == '.', c == '(', c == ')':
		default:
			return ""
		}
	}
	d := strings.TrimPrefix(b.String(), "00")
	if len(d) < 7 || len(d) > 15 || d[0] == '0' {
		return ""
	}
	return d
}

// tokenShape and templateName are compiled on first use, not at every
// start of the process.
var (
	tokenShape   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^` + TokenShape[2:] + `$`) })
	templateName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]{1,512}$`) })
)

// Check checks the whatsapp section (when the channel is enabled).
func (c Config) Check(ch *config.Checker) {
	switch {
	case c.AccessToken == "":
		ch.Bad("access_token", "is required when whatsapp.enabled is true (a system user's token, from Business Settings → System users)")
	case strings.HasPrefix(c.AccessToken, "Bearer "):
		ch.Bad("access_token", `must be the token alone, without "Bearer " before it`)
	case !tokenShape().MatchString(c.AccessToken):
		ch.Bad("access_token", `does not look like a Meta access token (they start with "EAA")`)
	}
	if !allDigits(c.PhoneNumberID) {
		ch.Bad("phone_number_id", "must be the business number's id from WhatsApp → API Setup (digits, not the phone number itself), got %q", c.PhoneNumberID)
	}
	if c.AppSecret == "" {
		ch.Bad("app_secret", "is required: the Meta app's secret (App settings → Basic) signs every webhook request")
	}
	if c.VerifyToken == "" {
		ch.Bad("verify_token", "is required: the string you enter as the webhook's verify token in the App Dashboard")
	}
	switch p := c.WebhookPath; {
	case p == "":
	case !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, " {}?#"):
		ch.Bad("webhook_path", "must be a path starting with / and not ending with one, got %q", p)
	case p == "/healthz" || p == "/readyz" || p == "/metrics" || strings.HasPrefix(p, "/debug/"):
		ch.Bad("webhook_path", "%q is one of loadout's own endpoints; choose another path", p)
	}
	ch.URL("api_url", c.APIURL)
	for _, n := range c.AllowedNumbers {
		if Digits(n) == "" {
			ch.Bad("allowed_numbers", "must hold phone numbers in international form, e.g. \"+15551234567\", got %q", n)
		}
	}
	if c.ReengageTemplate != "" {
		if _, _, err := template(c.ReengageTemplate); err != nil {
			ch.Bad("reengage_template", "%v", err)
		}
	}
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// template reads reengage_template: "name" or "name:language".
func template(v string) (name, language string, err error) {
	name, language, _ = strings.Cut(strings.TrimSpace(v), ":")
	if language == "" {
		language = "en_US"
	}
	if !templateName().MatchString(name) {
		return "", "", fmt.Errorf(`must be an approved template's name (lower-case letters, digits and _), optionally ":" and its language, got %q`, v)
	}
	return name, language, nil
}
