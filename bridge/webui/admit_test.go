package webui_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"loadout/bridge"
	"loadout/bridge/webui"
	"loadout/store/storetest"
)

// A person the channel they came from no longer lets in (the web side
// says bridge.ErrNotAdmitted) is told so in a sentence at every request
// of the chat, the page included, rather than sent to sign in; nothing
// they send is taken.
func TestAPersonNoLongerLetInIsToldSoAndNothingIsTaken(t *testing.T) {
	f := newFixture(t, storetest.Options{}, webui.Config{}, bridge.Delivery{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/chat"}, {"GET", "/chat/static/chat.js"}, {"GET", "/chat/stream"}, {"GET", "/chat/file?name=x"},
		{"POST", "/chat/send"}, {"POST", "/chat/answer"},
	} {
		ana := f.person(t, "telegram:42")
		f.auth.Refuse("telegram:42")
		form := url.Values{"id": {"abcdefgh12"}, "text": {"transfer everything"}, "approval": {"x"}, "choice": {"approve"}}
		req := ana.Request(c.method, f.srv.URL, c.path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The JSON the page shows escapes the apostrophes.
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "Your web session has ended") {
			t.Errorf("%s %s: %d %q", c.method, c.path, resp.StatusCode, b)
		}
	}
	if n := len(f.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns", n)
	}
}
