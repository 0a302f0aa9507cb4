package feishu

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"loadout/bridge"
	"loadout/bridge/feishu/feishutest"
	"loadout/store/storetest"
)

// Whatever a signed, encrypted event holds, the callback answers it
// without a panic: 200 (taken or dropped) or 400, never a server error;
// an unsigned one is always refused.
func FuzzCallback(f *testing.F) {
	fs := feishutest.New(f)
	for _, m := range []feishutest.Message{
		{From: ana, Text: "hello"},
		{From: mallory, Text: "hi"},
		{From: ana, Chat: "oc_team", Mention: true, Text: "@_user_1 @_user_1"},
		{From: ana, Type: "post", Content: `{"title":1,"content":[[{"tag":"at"}],null]}`},
		{From: ana, File: "x.txt", Bytes: []byte("x")},
		{From: ana, Type: "image", Content: `{"image_key":"../../etc"}`},
		{From: "not an id", Text: "x"},
	} {
		_, plain := fs.Event(m)
		f.Add(plain)
	}
	f.Add([]byte(`{"schema":"2.0","header":{"event_id":"e","event_type":"card.action.trigger","token":"` + feishutest.VerificationToken + `"},"event":{"operator":{"open_id":"` + ana + `"},"action":{"value":{"verb":"approve","q":"x","by":"` + ana + `","to":"../x"}}}}`))
	f.Add([]byte(`{"type":"url_verification","challenge":"c","token":"t"}`))
	f.Add([]byte(`[]`))
	env := storetest.NewEnv(f, storetest.Options{})
	a := New(testConfig(fs, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.bot = feishutest.BotOpenID // as after Run reached Feishu
	f.Fuzz(func(t *testing.T, plain []byte) {
		body := feishutest.Encrypt(feishutest.EncryptKey, plain)
		post := func(sign bool) int {
			req := httptest.NewRequest(http.MethodPost, DefaultCallbackPath, bytes.NewReader(body))
			if sign {
				req.Header.Set("X-Lark-Request-Timestamp", "1")
				req.Header.Set("X-Lark-Request-Nonce", "n")
				req.Header.Set("X-Lark-Signature", feishutest.Sign("1", "n", feishutest.EncryptKey, body))
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, req)
			return w.Code
		}
		if code := post(false); code == http.StatusOK && !bytes.Contains(plain, []byte("url_verification")) {
			t.Fatalf("unsigned %q: %d", plain, code)
		}
		if code := post(true); code >= 500 {
			t.Fatalf("signed %q: %d", plain, code)
		}
	})
}
