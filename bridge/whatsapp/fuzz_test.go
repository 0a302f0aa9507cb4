package whatsapp

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"loadout/bridge"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/store/storetest"
)

// Whatever a signed body holds, the webhook answers it without a panic,
// 200 (taken or ignored) or 400, never a server error; an unsigned one
// is always 401.
func FuzzWebhook(f *testing.F) {
	wa := whatsapptest.New(f)
	for _, m := range []whatsapptest.Message{
		{From: ana, Text: "hello"},
		{From: mallory, Text: "hi"},
		{From: ana, Type: "location", Raw: map[string]any{"latitude": 1.5, "longitude": "x"}},
		{From: ana, Type: "interactive", Raw: map[string]any{"type": "button_reply", "button_reply": map[string]any{"id": "ok::", "title": 3}}},
		{From: "not a number", Text: "x"},
	} {
		_, body := wa.Body(m)
		f.Add(body)
	}
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"statuses":[{"id":"x","status":"failed","recipient_id":"15551230001","errors":[{"code":"131026"}]}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":null}`))
	f.Add([]byte(`[]`))
	env := storetest.NewEnv(f, storetest.Options{})
	a := New(testConfig(wa, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), bridge.NewRouter(env.Engine, "loadout"), env.Store)
	f.Fuzz(func(t *testing.T, body []byte) {
		post := func(sig string) int {
			req := httptest.NewRequest(http.MethodPost, DefaultWebhookPath, bytes.NewReader(body))
			if sig != "" {
				req.Header.Set("X-Hub-Signature-256", sig)
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, req)
			return w.Code
		}
		if code := post(""); code != http.StatusUnauthorized {
			t.Fatalf("unsigned: %d", code)
		}
		if code := post(whatsapptest.Sign(whatsapptest.AppSecret, body)); code != http.StatusOK && code != http.StatusBadRequest {
			t.Fatalf("signed %q: %d", body, code)
		}
	})
}
