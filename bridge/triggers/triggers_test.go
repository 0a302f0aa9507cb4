package triggers_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/quick"

	"loadout/bridge"
	"loadout/bridge/triggers"
	"loadout/config"
)

const secret = "a-secret-of-enough-length"

// starter records the events handed to chats.
type starter struct {
	mu   sync.Mutex
	got  []bridge.Pending
	down bool
}

func (s *starter) Start(_ context.Context, p bridge.Pending) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false, errors.New("bridge: no running channel delivers to it")
	}
	s.got = append(s.got, p)
	return true, nil
}

func (s *starter) events() []bridge.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bridge.Pending(nil), s.got...)
}

// private says every chat is private.
type private struct{}

func (private) Private(string) bool { return true }

func serve(t *testing.T, st *starter) *httptest.Server {
	t.Helper()
	h := triggers.New([]triggers.Trigger{{Name: "deploys", Secret: secret, Chat: "telegram:42", Prompt: "Say what was deployed.", Groups: []string{"web"}}},
		nil, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	h.Mount(mux, bridge.NewRouter(nil, "loadout"), private{}, "")
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url string, body []byte, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Only a request signed with the trigger's secret, over its own body,
// starts anything; an unknown trigger answers as a wrong signature does.
func TestOnlySignedRequestsStartTurns(t *testing.T) {
	st := &starter{}
	srv := serve(t, st)
	body := []byte(`{"ref":"refs/heads/main","after":"abc123"}`)
	for _, c := range []struct {
		name, path string
		header     map[string]string
		want       int
	}{
		{"unsigned", "/hooks/deploys", nil, http.StatusUnauthorized},
		{"wrong secret", "/hooks/deploys", map[string]string{"X-Hub-Signature-256": bridge.HubSign("another-secret-entirely", body)}, http.StatusUnauthorized},
		{"another body", "/hooks/deploys", map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, []byte(`{"ref":"x"}`))}, http.StatusUnauthorized},
		{"not hex", "/hooks/deploys", map[string]string{"X-Hub-Signature-256": "sha256=zz"}, http.StatusUnauthorized},
		{"sha1 only", "/hooks/deploys", map[string]string{"X-Hub-Signature": "sha1=00"}, http.StatusUnauthorized},
		{"unknown trigger", "/hooks/other", map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, body)}, http.StatusUnauthorized},
	} {
		if got := post(t, srv.URL+c.path, body, c.header); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if n := len(st.events()); n != 0 {
		t.Fatalf("refused requests started %d turns", n)
	}
	if got := post(t, srv.URL+"/hooks/deploys", body, map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, body), "X-GitHub-Delivery": "d-1"}); got != http.StatusAccepted {
		t.Fatalf("a signed request: %d", got)
	}
	ev := st.events()
	if len(ev) != 1 {
		t.Fatalf("%d turns started", len(ev))
	}
	in := ev[0].Inbound
	switch {
	case ev[0].ID != "trigger:deploys:id:d-1":
		t.Errorf("event id %q, want the delivery's", ev[0].ID)
	case in.ChatKey != "telegram:42" || in.UserKey != "telegram:42":
		t.Errorf("runs in %s as %s", in.ChatKey, in.UserKey)
	case !in.Tainted || len(in.Groups) != 1 || in.Groups[0] != "web":
		t.Errorf("tainted %v, groups %v", in.Tainted, in.Groups)
	case !strings.HasPrefix(in.Text, "Say what was deployed.") || !strings.Contains(in.Text, string(body)):
		t.Errorf("text %q", in.Text)
	}
}

// Without a delivery id, the event is named by its body: the same body
// again is the same event, which the chat's inbox takes once.
func TestTheSameBodyIsTheSameEvent(t *testing.T) {
	st := &starter{}
	srv := serve(t, st)
	for _, body := range []string{"one", "one", "two"} {
		post(t, srv.URL+"/hooks/deploys", []byte(body), map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, []byte(body))})
	}
	ev := st.events()
	if len(ev) != 3 || ev[0].ID != ev[1].ID || ev[0].ID == ev[2].ID {
		t.Fatalf("ids %q %q %q: the same body must name the same event, another body another", ev[0].ID, ev[1].ID, ev[2].ID)
	}
}

// A body over MaxBody gets 413 and starts nothing; a chat whose channel
// is not running gets 503, so the sender tries again.
func TestBodiesAreCappedAndADownChannelIsRetried(t *testing.T) {
	st := &starter{}
	srv := serve(t, st)
	big := bytes.Repeat([]byte("x"), triggers.MaxBody+1)
	if got := post(t, srv.URL+"/hooks/deploys", big, map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, big)}); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the cap: %d", got)
	}
	st.down = true
	if got := post(t, srv.URL+"/hooks/deploys", []byte("x"), map[string]string{"X-Hub-Signature-256": bridge.HubSign(secret, []byte("x"))}); got != http.StatusServiceUnavailable {
		t.Fatalf("a chat whose channel is down: %d", got)
	}
	if n := len(st.events()); n != 0 {
		t.Fatalf("%d turns started", n)
	}
}

// The turn's text carries at most MaxText of the body, valid UTF-8, with
// the prompt first; any body and any header are read in linear time and
// never crash.
func TestTextAndSignatureTakeAnyInput(t *testing.T) {
	f := func(prompt string, body []byte, header string) bool {
		text := triggers.Text(prompt, body)
		_ = bridge.HubSigned(secret, body, header)
		return strings.HasPrefix(text, strings.TrimSpace(prompt)) && len(text) <= len(prompt)+triggers.MaxText+300
	}
	if err := quick.Check(f, nil); err != nil {
		t.Fatal(err)
	}
	if !bridge.HubSigned(secret, []byte("b"), bridge.HubSign(secret, []byte("b"))) {
		t.Fatal("Sign's signature does not check")
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	ch := &config.Checker{}
	triggers.Check(ch, []triggers.Trigger{
		{Name: "ok", Secret: secret, Chat: "telegram:1", Prompt: "p"},
		{Name: "ok", Secret: "short", Chat: "nochannel", Prompt: "/clear"},
		{Name: "Bad Name", Secret: secret, Chat: "slack:T:C", Prompt: "p"},
	}, []string{"telegram"})
	got := errors.Join(ch.Errors()...).Error()
	for _, want := range []string{"triggers[1].name", "triggers[1].secret", "triggers[1].chat", "triggers[1].prompt", "triggers[2].name", `triggers[2].chat: names the channel "slack", which is not enabled`} {
		if !strings.Contains(got, want) {
			t.Errorf("the errors do not name %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "triggers[0]") {
		t.Errorf("a good trigger is refused:\n%s", got)
	}
}
