package bridge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// HubSigned reports whether header, an X-Hub-Signature-256 value
// ("sha256=<hex>"), is the HMAC-SHA256 of body under secret: how Meta
// (WhatsApp), GitHub, Gitea and Gogs sign what they post. The comparison
// takes the same time wherever the two differ; an empty secret signs
// nothing.
func HubSigned(secret string, body []byte, header string) bool {
	got, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok || secret == "" {
		return false
	}
	sum, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	return hmac.Equal(sum, hubMAC(secret, body))
}

// HubSign is the X-Hub-Signature-256 value of body under secret.
func HubSign(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(hubMAC(secret, body))
}

func hubMAC(secret string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return mac.Sum(nil)
}
