package signal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/signal/signaltest"
	"loadout/store/storetest"
)

// allowedSender reads who an envelope says sent it, apart from the
// channel's types, and applies the allow-list rule written out: Ana's
// and Bea's numbers, Uma's account id.
func allowedSender(raw json.RawMessage) bool {
	var e struct {
		Envelope struct {
			Number *string `json:"sourceNumber"`
			UUID   *string `json:"sourceUuid"`
		} `json:"envelope"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return false
	}
	if n := e.Envelope.Number; n != nil && (E164(*n) == ana.Number || E164(*n) == bea.Number) {
		return true
	}
	return e.Envelope.UUID != nil && strings.EqualFold(strings.TrimSpace(*e.Envelope.UUID), uma.UUID)
}

// FuzzReceive reads whatever signal-cli's receive method could return:
// nothing panics, and only an allowed person's message is ever stored.
func FuzzReceive(f *testing.F) {
	msg := func(from signaltest.Person, data string) string {
		return fmt.Sprintf(`[{"account":%q,"envelope":{"sourceNumber":%q,"sourceUuid":%q,"timestamp":7,"dataMessage":%s}}]`,
			signaltest.Account, from.Number, from.UUID, data)
	}
	f.Add(msg(ana, `{"timestamp":7,"message":"hello"}`))
	f.Add(msg(mallory, `{"timestamp":7,"message":"let me in"}`))
	f.Add(msg(ana, `{"timestamp":7,"message":"\ufffc hi","groupInfo":{"groupId":"Zw=="},"mentions":[{"number":"+15550000000","start":0,"length":1}]}`))
	f.Add(msg(ana, `{"timestamp":7,"message":"\ufffc hi","groupInfo":{"groupId":"Zw=="},"mentions":[{"number":"+15550000000","start":5,"length":-3},{"start":-1,"length":99}]}`))
	f.Add(msg(bea, `{"timestamp":7,"groupInfo":{"groupId":"Zw=="},"quote":{"id":1,"authorNumber":"+15550000000"},"message":"yes"}`))
	f.Add(msg(ana, `{"timestamp":7,"reaction":{"emoji":"👍","targetAuthorNumber":"+15550000000","targetSentTimestamp":1}}`))
	f.Add(msg(ana, `{"timestamp":7,"attachments":[{"id":"../../etc/passwd","filename":"../x","contentType":"audio/aac","size":-1}]}`))
	f.Add(`[{"envelope":{"sourceUuid":"` + strings.ToUpper(uma.UUID) + `","timestamp":9,"dataMessage":{"message":"hi"}}}]`)
	f.Add(`[{"envelope":{"sourceNumber":"+15551230001","timestamp":1,"receiptMessage":{"when":1}}},{"envelope":null},{}]`)
	f.Add(`[{"envelope":{"sourceNumber":"+15551230001","sourceNumber":"+15559990666","timestamp":3,"dataMessage":{"message":"dup"}}}]`)
	fake := signaltest.New(f)
	env := storetest.NewEnv(f, storetest.Options{})
	cfg := testConfig(fake, bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	a := New(cfg, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	count := func() (n int64) { env.Store.Gorm().Table("inbox_items").Count(&n); return n }
	f.Fuzz(func(t *testing.T, raw string) {
		var got []json.RawMessage
		if json.Unmarshal([]byte(raw), &got) != nil {
			return // the call fails; nothing is read
		}
		for _, one := range got {
			var r received
			if json.Unmarshal(one, &r) != nil {
				continue
			}
			before := count()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a.envelope(ctx, r.Envelope)
			cancel()
			if count() > before && !allowedSender(one) {
				t.Fatalf("a stranger's envelope was stored: %s", one)
			}
		}
	})
}

// Reading a group message costs time in proportion to its size, however
// many mentions it holds.
func TestAddressedIsLinear(t *testing.T) {
	a := &Adapter{account: signaltest.Account}
	measure := func(n int) time.Duration {
		d := &dataMessage{Group: &groupInfo{GroupID: "g"}}
		for i := range n {
			d.Mentions = append(d.Mentions, mention{Number: signaltest.Account, Start: 2 * i, Length: 1})
		}
		text := strings.Repeat("\ufffc ", n)
		start := time.Now()
		if _, ok := a.addressed(d, text); !ok {
			t.Fatal("not addressed")
		}
		return time.Since(start)
	}
	measure(1000)
	small, large := measure(10_000), measure(100_000)
	if large > 40*small+50*time.Millisecond {
		t.Fatalf("10,000 mentions took %s, 100,000 took %s: not linear", small, large)
	}
}
