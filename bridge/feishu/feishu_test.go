package feishu

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/feishu/feishutest"
	"loadout/chat/chattest"
	"loadout/config"
	"loadout/store/storetest"
	"loadout/tools"
)

// rig is the channel running on the fake, with its log.
type rig struct {
	fs     *feishutest.Server
	env    *storetest.Env
	a      *Adapter
	logs   *chattest.LogBuffer
	tokens atomic.Int32 // token requests made
}

// counting counts the token requests a client makes.
type counting struct {
	n    *atomic.Int32
	next http.RoundTripper
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/tenant_access_token/internal") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

func newRig(t *testing.T, o storetest.Options, mut func(*Config)) *rig {
	t.Helper()
	r := &rig{fs: feishutest.New(t), env: storetest.NewEnv(t, o), logs: &chattest.LogBuffer{}}
	cfg := testConfig(r.fs, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
		HTTPClient: &http.Client{Transport: counting{&r.tokens, http.DefaultTransport}}})
	if mut != nil {
		mut(&cfg)
	}
	r.a = New(cfg, bridge.NewRouter(r.env.Engine, "loadout"), r.env.Store)
	run(t, r.fs, r.a)
	return r
}

// waitTexts waits until to was sent n texts and returns them.
func (r *rig) waitTexts(t *testing.T, to string, n int) []string {
	t.Helper()
	r.fs.WaitFor(t, strconv.Itoa(n)+" texts to "+to, func() bool { return len(texts(r.fs, to)) >= n })
	return texts(r.fs, to)
}

// count counts rows of the store.
func (r *rig) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := r.env.Store.Gorm().Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// A stranger, in a private chat or mentioning the bot in a group, is
// refused once, and nothing they wrote is stored: no inbox item with
// their words or their key, no session, no turn. The log names their
// open id for the operator.
func TestStrangersAreRefusedBeforeAnythingIsStored(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Text("hello ana")
	r.fs.Send(t, feishutest.Message{From: mallory, Text: "let me in"})
	r.fs.Send(t, feishutest.Message{From: mallory, Text: "let me in, please"})
	r.fs.Send(t, feishutest.Message{From: mallory, Chat: "oc_team", Mention: true, Text: "let me in here"})
	r.fs.Send(t, feishutest.Message{From: ana, Text: "hi"})
	r.waitTexts(t, ana, 1)
	if err := r.a.Pipeline().Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := texts(r.fs, mallory); !slices.Equal(got, []string{bridge.TextRefused}) {
		t.Fatalf("mallory was sent %q, want one refusal", got)
	}
	if got := texts(r.fs, "oc_team"); len(got) != 0 {
		t.Fatalf("the group was sent %q", got)
	}
	if n := len(r.env.Model.Requests()); n != 1 {
		t.Fatalf("%d turns, want ana's alone", n)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM inbox_items WHERE text LIKE '%let me in%' OR user_key = ?", "feishu:"+mallory); n != 0 {
		t.Fatalf("%d inbox items hold mallory's words or key", n)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM sessions WHERE chat_key IN ?", []string{"feishu:" + mallory, "feishu:oc_team"}); n != 0 {
		t.Fatalf("%d sessions for mallory's chats", n)
	}
	log := r.logs.String()
	if !strings.Contains(log, "open_id="+mallory) || !strings.Contains(log, "feishu.allowed_users") || strings.Contains(log, "let me in") {
		t.Fatalf("the log does not name mallory's open id and the key, or holds her words:\n%s", log)
	}
}

// Empty allowed_users allows nobody.
func TestEmptyAllowlistAllowsNobody(t *testing.T) {
	r := newRig(t, storetest.Options{}, func(c *Config) { c.AllowedUsers = nil })
	r.fs.Send(t, feishutest.Message{From: ana, Text: "hi"})
	if got := r.waitTexts(t, ana, 1); got[0] != bridge.TextRefused {
		t.Fatalf("ana got %q", got)
	}
	if ok, _ := r.a.Admits(context.Background(), "feishu:"+ana); ok {
		t.Fatal("ana is admitted by an empty list")
	}
}

// In a group, the bot answers only messages that mention it, in the
// group, without the mention in the text the model reads.
func TestGroupMessagesAreTheBotsWhenTheyMentionIt(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Text("answered in the group")
	r.fs.Send(t, feishutest.Message{From: ana, Chat: "oc_team", Text: "talking among ourselves"})
	r.fs.Send(t, feishutest.Message{From: ana, Chat: "oc_team", Mention: true, Text: "what is on today?"})
	if got := r.waitTexts(t, "oc_team", 1); got[0] != "answered in the group" {
		t.Fatalf("the group got %q", got)
	}
	reqs := r.env.Model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d turns, want 1", len(reqs))
	}
	if got := reqs[0].Messages[len(reqs[0].Messages)-1].Content; got != "what is on today?" {
		t.Fatalf("the model read %q", got)
	}
	if r.a.Private("feishu:oc_team") || !r.a.Private("feishu:"+ana) {
		t.Fatal("a group taken for a private chat, or the other way round")
	}
}

// lastCard is the last card sent to to.
func lastCard(t *testing.T, r *rig, to string) feishutest.Sent {
	t.Helper()
	r.fs.WaitFor(t, "a card", func() bool {
		s := r.fs.SentTo(to)
		return len(s) > 0 && len(s[len(s)-1].Buttons) > 0
	})
	s := r.fs.SentTo(to)
	return s[len(s)-1]
}

// In a group, only the person asked answers an approval card: another
// member's press, a stranger's, and a press of a button whose value
// another member wrote naming themselves are refused with a toast, and
// nothing runs; the asker's press runs the call once.
func TestApprovalCardsAreBoundToTheAsker(t *testing.T) {
	var runs atomic.Int32
	r := newRig(t, storetest.Options{Register: func(reg *tools.Registry) error {
		return reg.Add(tools.New(tools.Definition{Name: "purge_archive", Description: "Delete the archive.", Effect: tools.EffectDestructive},
			func(context.Context, struct{}) (any, error) { runs.Add(1); return "purged", nil }))
	}}, nil)
	r.env.Model.Call("purge_archive", `{}`)
	r.env.Model.Text("The archive is gone.")
	r.fs.Send(t, feishutest.Message{From: ana, Chat: "oc_team", Mention: true, Text: "purge the archive"})
	card := lastCard(t, r, "oc_team")
	approve := card.Buttons[0]
	if !strings.HasPrefix(approve.Label, "Approve #") || approve.Value["by"] != ana {
		t.Fatalf("the card's first button is %+v", approve)
	}
	for _, by := range []string{bea, mallory} {
		if code, toast := r.fs.Press(t, by, card, approve); code != http.StatusOK || !strings.Contains(toast, bridge.TextNotYours) {
			t.Fatalf("%s's press was answered %d %s", by, code, toast)
		}
	}
	forged := feishutest.Button{Label: approve.Label, Value: map[string]any{"verb": "approve", "q": approve.Value["q"], "by": bea, "to": "oc_team"}}
	if code, toast := r.fs.Press(t, bea, card, forged); code != http.StatusOK || strings.Contains(toast, "success") {
		t.Fatalf("a press of a value bea wrote was answered %d %s", code, toast)
	}
	if err := r.a.Pipeline().Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 0 {
		t.Fatal("the call ran on someone else's press")
	}
	if code, toast := r.fs.Press(t, ana, card, approve); code != http.StatusOK || !strings.Contains(toast, "success") {
		t.Fatalf("ana's press was answered %d %s", code, toast)
	}
	r.fs.WaitFor(t, "the answer", func() bool { return slices.Contains(texts(r.fs, "oc_team"), "The archive is gone.") })
	if code, toast := r.fs.Press(t, ana, card, approve); code != http.StatusOK || strings.Contains(toast, "success") {
		t.Fatalf("a second press was answered %d %s", code, toast)
	}
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
}

// event is the plain JSON of an event with the given header fields.
func event(id, kind, token string, created time.Time, ev any) []byte {
	b, _ := json.Marshal(map[string]any{"schema": "2.0", "event": ev, "header": map[string]string{"event_id": id, "event_type": kind,
		"create_time": strconv.FormatInt(created.UnixMilli(), 10), "token": token, "app_id": feishutest.AppID}})
	return b
}

// Whoever learns the callback's address can post to it: an unsigned
// event, one signed or encrypted with another key, one changed after it
// was signed, one with a wrong verification token, an old one replayed,
// and bodies too large or not encrypted store nothing and run no turn.
// The URL verification is answered only with the verification token.
func TestForgedOrReplayedCallbacksStoreNothing(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	url := r.fs.CallbackURL
	msg := map[string]any{"sender": map[string]any{"sender_id": map[string]string{"open_id": ana}, "sender_type": "user"},
		"message": map[string]any{"message_id": "om_1", "chat_id": "oc_p2p", "chat_type": "p2p", "message_type": "text", "content": `{"text":"forged"}`}}
	plain := event("ev_forged", "im.message.receive_v1", feishutest.VerificationToken, time.Now(), msg)
	signed := func(key string, body []byte) map[string]string {
		return map[string]string{"X-Lark-Request-Timestamp": "1", "X-Lark-Request-Nonce": "n", "X-Lark-Signature": feishutest.Sign("1", "n", key, body)}
	}
	body := feishutest.Encrypt(feishutest.EncryptKey, plain)
	other := feishutest.Encrypt("another key", plain)
	changed := feishutest.Encrypt(feishutest.EncryptKey, []byte(strings.Replace(string(plain), "forged", "changed", 1)))
	for _, c := range []struct {
		name    string
		body    []byte
		headers map[string]string
		want    int
	}{
		{"unsigned", body, nil, http.StatusUnauthorized},
		{"signed with another key", body, signed("another key", body), http.StatusUnauthorized},
		{"encrypted and signed with another key", other, signed("another key", other), http.StatusUnauthorized},
		{"changed after it was signed", changed, signed(feishutest.EncryptKey, body), http.StatusUnauthorized},
		{"not encrypted", plain, signed(feishutest.EncryptKey, plain), http.StatusBadRequest},
		{"too large", []byte(`{"encrypt":"` + strings.Repeat("A", MaxBody) + `"}`), nil, http.StatusRequestEntityTooLarge},
	} {
		if code, _ := feishutest.PostTo(t, url, c.body, c.headers); code != c.want {
			t.Errorf("%s: answered %d, want %d", c.name, code, c.want)
		}
	}
	if code, _ := r.fs.Post(t, event("ev_token", "im.message.receive_v1", "a guessed token", time.Now(), msg)); code != http.StatusUnauthorized {
		t.Errorf("a wrong verification token: answered %d", code)
	}
	if code, _ := r.fs.Post(t, event("ev_old", "im.message.receive_v1", feishutest.VerificationToken, time.Now().Add(-MaxEventAge-time.Hour), msg)); code != http.StatusOK {
		t.Errorf("an old event: answered %d, want 200 (dropped)", code)
	}
	verify := func(token string) (int, string) {
		b, _ := json.Marshal(map[string]string{"challenge": "ch-1", "token": token, "type": "url_verification"})
		return feishutest.PostTo(t, url, feishutest.Encrypt(feishutest.EncryptKey, b), nil)
	}
	if code, answer := verify(feishutest.VerificationToken); code != http.StatusOK || !strings.Contains(answer, `"challenge":"ch-1"`) {
		t.Errorf("the URL verification was answered %d %s", code, answer)
	}
	if code, _ := verify("a guessed token"); code != http.StatusUnauthorized {
		t.Errorf("a URL verification with a wrong token was answered %d", code)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM inbox_items"); n != 0 {
		t.Fatalf("%d inbox items stored", n)
	}
	if n := len(r.env.Model.Requests()); n != 0 {
		t.Fatalf("%d turns", n)
	}
}

// The tenant access token is fetched once and kept until shortly before
// it expires; then a new one is fetched.
func TestTokenIsKeptUntilItExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	r := newRig(t, storetest.Options{}, func(c *Config) { c.now = func() time.Time { return time.Unix(0, now.Load()) } })
	for i := range 3 {
		r.env.Model.Text("answer")
		r.fs.Send(t, feishutest.Message{From: ana, Text: "hi"})
		r.waitTexts(t, ana, i+1)
	}
	if n := r.tokens.Load(); n != 1 {
		t.Fatalf("%d token requests for three answers, want 1", n)
	}
	now.Add(int64(2 * time.Hour))
	r.env.Model.Text("later")
	r.fs.Send(t, feishutest.Message{From: ana, Text: "hi again"})
	r.waitTexts(t, ana, 4)
	if n := r.tokens.Load(); n != 2 {
		t.Fatalf("%d token requests after the token expired, want 2", n)
	}
}

// A rich-text message reads as its title, paragraphs and links, with
// mentions by name and the bot's left out.
func TestRichTextIsRead(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.env.Model.Text("ok")
	content := `{"title":"Plan","content":[[{"tag":"at","user_id":"@_user_1"},{"tag":"text","text":" see "},{"tag":"a","text":"the doc","href":"https://example.org/d"}],[{"tag":"text","text":"thanks"}]]}`
	r.fs.Send(t, feishutest.Message{From: ana, Mention: true, Type: "post", Content: content})
	r.waitTexts(t, ana, 1)
	got := r.env.Model.Last(t).Messages
	if text := got[len(got)-1].Content; text != "Plan\n see the doc (https://example.org/d)\nthanks" {
		t.Fatalf("the model read %q", text)
	}
}

// Every problem of the section names its key.
func TestConfigErrorsNameTheirKey(t *testing.T) {
	bad := Config{Enabled: true, AppID: "app", CallbackPath: "/healthz", APIURL: "ftp://x", AllowedUsers: []string{"ana@example.org"}}
	ch := &config.Checker{Section: "feishu"}
	bad.Check(ch)
	var got []string
	for _, err := range ch.Errors() {
		got = append(got, err.Error())
	}
	for _, key := range []string{"app_id", "app_secret", "verification_token", "encrypt_key", "callback_path", "api_url", "allowed_users"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "config: feishu."+key+": ") }) {
			t.Errorf("no error names feishu.%s: %q", key, got)
		}
	}
	good := testConfig(feishutest.New(t), bridge.Delivery{})
	ch = &config.Checker{Section: "feishu"}
	good.Check(ch)
	if errs := ch.Errors(); len(errs) != 0 {
		t.Fatalf("the tests' config is refused: %v", errs)
	}
}
