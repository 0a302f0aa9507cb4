package whatsapptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"loadout/bridge"
)

// Webhook deliveries: notifications posted to the channel's webhook,
// signed as Meta signs them, and the statuses of what the bot sent.

// Status is news of a sent message, as the fake reports it.
type Status struct {
	ID, Status, To string
	// Code and Title describe a failure.
	Code  int
	Title string
}

// Webhook points the people's side at the channel's webhook URL.
func (s *Server) Webhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhook = url
}

// WebhookURL is where the people's side posts.
func (s *Server) WebhookURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// Secret makes the fake sign with another app secret (a forger's).
func (s *Server) Secret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secret = secret
}

// Sign is the X-Hub-Signature-256 Meta sends with body, made with the
// app secret.
func Sign(secret string, body []byte) string { return bridge.HubSign(secret, body) }

// Notification is a webhook body: value under one change of field
// "messages", for the number PhoneNumberID.
func Notification(value map[string]any) []byte {
	value["messaging_product"] = "whatsapp"
	value["metadata"] = map[string]string{"display_phone_number": Display, "phone_number_id": PhoneNumberID}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "WABA1", "changes": []any{map[string]any{"field": "messages", "value": value}},
	}}})
	return b
}

// Post posts a body to the webhook, signed with the fake's secret, and
// returns the status it was answered with.
func (s *Server) Post(t testing.TB, body []byte) int {
	t.Helper()
	s.mu.Lock()
	url, secret := s.webhook, s.secret
	s.mu.Unlock()
	return PostSigned(t, url, body, Sign(secret, body))
}

// PostSigned posts body to url with signature (none when ""), and
// returns the status it was answered with.
func PostSigned(t testing.TB, url string, body []byte, signature string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := (&http.Client{Timeout: Wait}).Do(req)
	if err != nil {
		t.Fatalf("posting to the webhook: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Report posts the status of a sent message to the webhook.
func (s *Server) Report(t testing.TB, st Status) int {
	t.Helper()
	return s.Post(t, statusBody(st))
}

func statusBody(st Status) []byte {
	obj := map[string]any{"id": st.ID, "status": st.Status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10), "recipient_id": st.To}
	if st.Code != 0 {
		obj["errors"] = []any{map[string]any{"code": st.Code, "title": st.Title, "message": st.Title,
			"error_data": map[string]string{"details": st.Title}}}
	}
	return Notification(map[string]any{"statuses": []any{obj}})
}

// report posts statuses in the background, as Meta does after a send.
func (s *Server) report(sts ...Status) {
	s.mu.Lock()
	url, secret := s.webhook, s.secret
	s.mu.Unlock()
	if url == "" {
		return
	}
	go func() {
		for _, st := range sts {
			body := statusBody(st)
			for range 50 {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
				resp, err := (&http.Client{Timeout: Wait}).Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
}
