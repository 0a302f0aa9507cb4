package feishutest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Message is a person's (From, an open id) in Chat (a group's; "": a
// private chat): Text, or a file (a picture when Image) named File;
// Type and Content, when set, are taken as is.
type Message struct {
	From, Chat, Text, File, Type, Content string
	Mention, Image                        bool
	Bytes                                 []byte
}

// id is a new id with prefix.
func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return fmt.Sprintf("%s%06d", prefix, s.next)
}

// event is an event of type kind carrying ev, in plain JSON.
func (s *Server) event(kind string, ev any) (string, []byte) {
	id, at := s.id("ev00000000000000000000"), time.Now()
	b, _ := json.Marshal(map[string]any{"schema": "2.0", "event": ev, "header": map[string]string{"event_id": id, "event_type": kind,
		"create_time": strconv.FormatInt(at.UnixMilli(), 10), "token": VerificationToken, "app_id": AppID, "tenant_key": "tenant0"}})
	s.mu.Lock()
	s.bodies[id] = b
	s.mu.Unlock()
	return id, b
}

// Event is the plain JSON of m's event, and the event's id.
func (s *Server) Event(m Message) (string, []byte) {
	msg, key := s.id("om_in"), s.id("file_in")
	kind, content := "text", map[string]string{"text": m.Text}
	var mentions []any
	if m.Mention {
		content["text"] = "@_user_1 " + m.Text
		mentions = []any{map[string]any{"key": "@_user_1", "name": "loadout", "id": map[string]string{"open_id": BotOpenID}}}
	}
	if m.File != "" {
		kind, content = "file", map[string]string{"file_key": key, "file_name": m.File}
		if m.Image {
			kind, content = "image", map[string]string{"image_key": key}
		}
		s.mu.Lock()
		s.resources[msg+"/"+key] = m.Bytes
		s.mu.Unlock()
	}
	raw, _ := json.Marshal(content)
	if m.Type != "" {
		kind, raw = m.Type, []byte(m.Content)
	}
	chat, chatType := m.Chat, "group"
	if chat == "" {
		chat, chatType = "oc_p2p_"+m.From, "p2p"
	}
	return s.event("im.message.receive_v1", map[string]any{
		"sender": map[string]any{"sender_id": map[string]string{"open_id": m.From}, "sender_type": "user"},
		"message": map[string]any{"message_id": msg, "chat_id": chat, "chat_type": chatType, "message_type": kind,
			"content": string(raw), "mentions": mentions}})
}

// Send posts m's event until it is taken (200); it returns its id.
func (s *Server) Send(t testing.TB, m Message) string {
	t.Helper()
	id, _ := s.Event(m)
	s.Redeliver(t, id)
	return id
}

// Redeliver posts event id again, as after a lost acknowledgement.
func (s *Server) Redeliver(t testing.TB, id string) {
	t.Helper()
	s.mu.Lock()
	body := s.bodies[id]
	s.mu.Unlock()
	if code, _ := s.Post(t, body); code != http.StatusOK {
		t.Fatalf("the callback answered %d to event %s", code, id)
	}
}

// Press presses button b of card as by: the answer's status and toast.
func (s *Server) Press(t testing.TB, by string, card Sent, b Button) (int, string) {
	t.Helper()
	_, plain := s.event("card.action.trigger", map[string]any{
		"operator": map[string]string{"open_id": by}, "action": map[string]any{"tag": "button", "value": b.Value},
		"host": "im_message", "context": map[string]string{"open_message_id": card.ID, "open_chat_id": "oc_of_" + card.To}})
	return s.Post(t, plain)
}

// Post posts plain encrypted and signed with EncryptKey to the callback.
func (s *Server) Post(t testing.TB, plain []byte) (int, string) {
	t.Helper()
	body := Encrypt(EncryptKey, plain)
	ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), strconv.FormatInt(time.Now().UnixNano(), 36)
	return PostTo(t, s.CallbackURL, body, map[string]string{"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce,
		"X-Lark-Signature": Sign(ts, nonce, EncryptKey, body)})
}

// Encrypt is plain as Feishu sends it: {"encrypt": base64(IV, plain in
// AES-256-CBC under key's SHA-256, PKCS#7-padded)}.
func Encrypt(key string, plain []byte) []byte {
	k := sha256.Sum256([]byte(key))
	block, _ := aes.NewCipher(k[:])
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	buf := append(make([]byte, aes.BlockSize), plain...)
	buf = append(buf, bytes.Repeat([]byte{byte(pad)}, pad)...)
	rand.Read(buf[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, buf[:aes.BlockSize]).CryptBlocks(buf[aes.BlockSize:], buf[aes.BlockSize:])
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(buf)})
	return b
}

// Sign is body's X-Lark-Signature: hex SHA-256(timestamp+nonce+key+body).
func Sign(timestamp, nonce, key string, body []byte) string {
	sum := sha256.Sum256(append([]byte(timestamp+nonce+key), body...))
	return hex.EncodeToString(sum[:])
}

// PostTo posts body to url with headers: the answer's status and body.
func PostTo(t testing.TB, url string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: Wait}).Do(req)
	if err != nil {
		t.Fatalf("posting to the callback: %v", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}
