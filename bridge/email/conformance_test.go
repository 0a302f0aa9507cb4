package email

import (
	"log/slog"
	"regexp"
	"sync"
	"testing"

	"loadout/bridge"
	"loadout/bridge/bridgetest"
	"loadout/bridge/email/emailtest"
	"loadout/chat/chattest"
)

// E-mail passes the channel conformance suite against a real IMAP
// server and a recording SMTP server, each chat a thread of one person.
func TestConformance(t *testing.T) {
	bridgetest.Run(t, &conformance{raw: map[string][]byte{}})
}

// conformance is the suite's harness: Ana's thread and Bea's.
type conformance struct {
	bridgetest.Fakes[*emailtest.Server]
	mu  sync.Mutex
	raw map[string][]byte // sent messages by Message-ID, to redeliver
}

var people = []string{ana, bea}

// root is the first message id of chat i's thread.
func root(i int) string { return []string{"thread-ana@example.org", "thread-bea@example.net"}[i] }

func (c *conformance) Caps() bridgetest.Caps {
	return bridgetest.Caps{Chats: 2, Redeliver: true, FilesIn: true, FilesOut: true}
}

func (c *conformance) server(t *testing.T) *emailtest.Server {
	return c.For(t, func(t testing.TB) *emailtest.Server { return emailtest.New(t, emailtest.Options{}) })
}

func (c *conformance) Start(t *testing.T, b bridgetest.Boot) (bridge.Channel, func()) {
	srv := c.server(t)
	cfg := testConfig(srv)
	cfg.Delivery = b.Delivery
	cfg.Logger = slog.New(slog.NewTextHandler(&chattest.LogBuffer{}, nil))
	a, err := New(cfg, bridge.NewRouter(b.Env.Engine, "loadout"), b.Env.Store)
	if err != nil {
		t.Fatal(err)
	}
	return a, running(t, a)
}

func (c *conformance) ChatKey(i int) string { return chatKey(people[i], root(i)) }

func (c *conformance) deliver(t *testing.T, i int, m emailtest.Mail) string {
	m.From, m.ID, m.Auth = people[i], newID(), emailtest.Pass(domainOf(people[i]))
	m.Subject, m.References, m.InReplyTo = "Re: our thread", []string{root(i)}, root(i)
	raw := m.Bytes()
	c.mu.Lock()
	c.raw[m.ID] = raw
	c.mu.Unlock()
	c.server(t).DeliverRaw(t, raw)
	return m.ID
}

func domainOf(addr string) string {
	for i := range addr {
		if addr[i] == '@' {
			return addr[i+1:]
		}
	}
	return ""
}

func (c *conformance) Send(t *testing.T, i int, text string) string {
	return c.deliver(t, i, emailtest.Mail{Text: text})
}

func (c *conformance) Redeliver(t *testing.T, _ int, ref string) {
	c.mu.Lock()
	raw := c.raw[ref]
	c.mu.Unlock()
	c.server(t).DeliverRaw(t, raw)
}

func (c *conformance) SendFile(t *testing.T, i int, name string, content []byte, text string) string {
	return c.deliver(t, i, emailtest.Mail{Text: text, Files: []emailtest.File{{Name: name, Type: "text/plain", Content: content}}})
}

// thread is what was sent in chat i's thread.
func (c *conformance) thread(i int) []emailtest.Sent {
	var out []emailtest.Sent
	for _, s := range sentTo(c.Fake(), people[i]) {
		if len(s.References) > 0 && s.References[0] == root(i) {
			out = append(out, s)
		}
	}
	return out
}

func (c *conformance) Answers(i int) []string {
	var out []string
	for _, s := range c.thread(i) {
		if len(s.Files) == 0 {
			out = append(out, s.Body())
		}
	}
	return out
}

func (c *conformance) Uploads(i int) map[string][]byte {
	out := map[string][]byte{}
	for _, s := range c.thread(i) {
		for name, b := range s.Files {
			out[name] = b
		}
	}
	return out
}

var requestCode = regexp.MustCompile(`Request (#[a-z0-9]+)`)

// Approve replies to the last question as a person does: "approve
// #code" on the reply's first line.
func (c *conformance) Approve(t *testing.T, i int) {
	answers := c.Answers(i)
	for k := len(answers) - 1; k >= 0; k-- {
		if m := requestCode.FindStringSubmatch(answers[k]); m != nil {
			c.Send(t, i, "approve "+m[1]+"\n\n> "+answers[k])
			return
		}
	}
	t.Fatal("no question with a request code")
}

func (c *conformance) Hold(int)  {}
func (c *conformance) Release()  {}
func (c *conformance) Held() int { return 0 }

// What the e-mail channel can do besides the contract.
var (
	_ bridge.Readier    = (*Adapter)(nil)
	_ bridge.FileSender = (*Adapter)(nil)
	_ bridge.Asker      = (*Adapter)(nil)
)
