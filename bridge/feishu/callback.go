package feishu

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"

	"loadout/bridge"
)

// ServeHTTP is the callback (mounted at feishu.callback_path), which
// Feishu posts the app's events and card presses to.
//
// A request that carries X-Lark-Signature must be signed with
// feishu.encrypt_key (the SHA-256 of X-Lark-Request-Timestamp,
// X-Lark-Request-Nonce, the key and the raw body, compared in constant
// time) before anything in the body is read; one that does not may only
// be the URL verification, which Feishu sends unsigned but encrypted,
// and is answered with its challenge when it decrypts and carries
// feishu.verification_token. Every event must be encrypted with the key
// and carry the verification token in its header; anything else is
// answered 401, a body over MaxBody 413, one that does not decrypt to an
// event 400, and none of them stores anything. An event older than
// MaxEventAge, of another app, or of a kind the channel does not take is
// answered 200 and dropped.
//
// A message is stored in the inbox before the answer is 200; one that
// cannot be stored makes it 500 (503 while shutting down or before the
// channel has reached Feishu), and Feishu delivers it again, recognised
// by its event id. A card press is answered with a toast.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			a.log.Warn("feishu: a callback request larger than the most taken was refused", "remote", r.RemoteAddr, "max_bytes", MaxBody)
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "unreadable request", http.StatusBadRequest)
		return
	}
	sig := r.Header.Get("X-Lark-Signature")
	signed := sig != ""
	if signed && !Signed(a.cfg.EncryptKey, r.Header.Get("X-Lark-Request-Timestamp"), r.Header.Get("X-Lark-Request-Nonce"), body, sig) {
		a.log.Warn("feishu: a callback request with a wrong signature was refused; check feishu.encrypt_key", "remote", r.RemoteAddr)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	plain, err := Decrypt(a.cfg.EncryptKey, body)
	if err != nil {
		a.log.Warn("feishu: a callback request that does not decrypt was refused; check feishu.encrypt_key", "remote", r.RemoteAddr, "err", err)
		http.Error(w, "not an encrypted event", http.StatusBadRequest)
		return
	}
	var e envelope
	if err := json.Unmarshal(plain, &e); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	if e.Type == "url_verification" {
		a.verification(w, r, e)
		return
	}
	if !signed {
		a.log.Warn("feishu: an unsigned callback request was refused", "remote", r.RemoteAddr)
		http.Error(w, "unsigned request", http.StatusUnauthorized)
		return
	}
	if e.Schema != "2.0" || e.Header.EventID == "" {
		a.log.Warn("feishu: a signed callback request is not an event of schema 2.0; set the subscription's events to version 2.0", "schema", e.Schema)
		http.Error(w, "not a 2.0 event", http.StatusBadRequest)
		return
	}
	if !a.verified(e.Header.Token) {
		a.log.Warn("feishu: an event with a wrong verification token was refused; check feishu.verification_token", "remote", r.RemoteAddr)
		http.Error(w, "wrong verification token", http.StatusUnauthorized)
		return
	}
	if e.Header.AppID != "" && e.Header.AppID != a.cfg.AppID {
		a.log.Warn("feishu: an event of another app was dropped", "app_id", e.Header.AppID)
		w.WriteHeader(http.StatusOK)
		return
	}
	if a.stale(e.Header.CreateTime) {
		a.log.Warn("feishu: an event older than the most taken was dropped (a replay, or one delivered very late)", "event", e.Header.EventID, "created", e.Header.CreateTime)
		w.WriteHeader(http.StatusOK)
		return
	}
	if a.self() == "" {
		// Not yet reached Feishu: no inbox to answer from; it retries.
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	switch e.Header.EventType {
	case "im.message.receive_v1":
		var ev messageEvent
		if err := json.Unmarshal(e.Event, &ev); err != nil {
			http.Error(w, "not a message event", http.StatusBadRequest)
			return
		}
		a.answer(w, a.message(r.Context(), e.Header.EventID, ev))
	case "card.action.trigger":
		var ev pressEvent
		if err := json.Unmarshal(e.Event, &ev); err != nil {
			http.Error(w, "not a card action", http.StatusBadRequest)
			return
		}
		toast, err := a.press(r.Context(), e.Header.EventID, ev)
		if err != nil {
			a.answer(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"toast": toast})
	default:
		a.log.Debug("feishu: an event of a kind the channel does not take; dropped", "event_type", e.Header.EventType)
		w.WriteHeader(http.StatusOK)
	}
}

// answer answers an event after it was taken (err nil: 200) or not.
func (a *Adapter) answer(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, bridge.ErrStopped):
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	default:
		a.log.Error("feishu: an event could not be stored; Feishu will deliver it again", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
	}
}

// verification answers the URL verification Feishu sends when the
// callback's address is saved in the developer console.
func (a *Adapter) verification(w http.ResponseWriter, r *http.Request, e envelope) {
	if !a.verified(e.Token) {
		a.log.Warn("feishu: a URL verification with a wrong verification token was refused; check feishu.verification_token", "remote", r.RemoteAddr)
		http.Error(w, "wrong verification token", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"challenge": e.Challenge})
}

// verified reports whether token is feishu.verification_token, in
// constant time.
func (a *Adapter) verified(token string) bool {
	return a.cfg.VerificationToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.cfg.VerificationToken)) == 1
}

// stale reports whether an event created at createTime (Unix
// milliseconds, as Feishu writes it) is older than MaxEventAge. A time
// that does not read is not judged.
func (a *Adapter) stale(createTime string) bool {
	ms, err := strconv.ParseInt(createTime, 10, 64)
	if err != nil || ms <= 0 {
		return false
	}
	return a.cfg.now().Sub(time.UnixMilli(ms)) > MaxEventAge
}

// Signed reports whether signature (an X-Lark-Signature header) is the
// hex SHA-256 of timestamp, nonce, key and body, as Feishu signs a
// callback. The comparison takes the same time wherever the two differ.
func Signed(key, timestamp, nonce string, body []byte, signature string) bool {
	if key == "" {
		return false
	}
	want := larkevent.Signature(timestamp, nonce, key, string(body))
	return subtle.ConstantTimeCompare([]byte(want), []byte(signature)) == 1
}

// Decrypt reads an encrypted callback body, {"encrypt": "<base64>"}:
// AES-256-CBC under the SHA-256 of key, its first block the IV.
func Decrypt(key string, body []byte) ([]byte, error) {
	var enc struct {
		Encrypt string `json:"encrypt"`
	}
	if err := json.Unmarshal(body, &enc); err != nil || enc.Encrypt == "" {
		return nil, errors.New("the body is not an encrypted event")
	}
	if key == "" {
		return nil, errors.New("no encrypt key to read it with")
	}
	return larkevent.EventDecrypt(enc.Encrypt, key)
}

// envelope is a decrypted callback: an event of schema 2.0, or the URL
// verification.
type envelope struct {
	Schema string `json:"schema"`
	Header struct {
		EventID    string `json:"event_id"`
		EventType  string `json:"event_type"`
		CreateTime string `json:"create_time"`
		Token      string `json:"token"`
		AppID      string `json:"app_id"`
	} `json:"header"`
	Event json.RawMessage `json:"event"`
	// The URL verification's.
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	Token     string `json:"token"`
}

// id is a user's ids as an event gives them; open_id is the one the
// channel knows people by.
type id struct {
	OpenID string `json:"open_id"`
	UserID string `json:"user_id"`
}

// messageEvent is im.message.receive_v1: a message sent to the bot.
type messageEvent struct {
	Sender struct {
		SenderID   id     `json:"sender_id"`
		SenderType string `json:"sender_type"`
	} `json:"sender"`
	Message struct {
		MessageID   string `json:"message_id"`
		ChatID      string `json:"chat_id"`
		ChatType    string `json:"chat_type"`
		MessageType string `json:"message_type"`
		Content     string `json:"content"`
		Mentions    []struct {
			Key  string `json:"key"`
			ID   id     `json:"id"`
			Name string `json:"name"`
		} `json:"mentions"`
	} `json:"message"`
}

// pressEvent is card.action.trigger: a press of a card's button.
type pressEvent struct {
	Operator id `json:"operator"`
	Action   struct {
		Value map[string]any `json:"value"`
		Tag   string         `json:"tag"`
	} `json:"action"`
	Context struct {
		OpenMessageID string `json:"open_message_id"`
		OpenChatID    string `json:"open_chat_id"`
	} `json:"context"`
}
