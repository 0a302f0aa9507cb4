package whatsapp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"loadout/bridge"
)

// ServeHTTP is the webhook (mounted at whatsapp.webhook_path).
//
// GET is Meta's verification handshake: with hub.mode "subscribe" and
// hub.verify_token equal to whatsapp.verify_token it answers
// hub.challenge, and 403 otherwise.
//
// POST is a notification. Its X-Hub-Signature-256 must be the
// HMAC-SHA256 of the raw body under whatsapp.app_secret (compared in
// constant time) before anything in the body is read: an unsigned or
// wrongly signed request is answered 401, a body over MaxBody 413, one
// that is not a JSON notification 400, and none of them stores
// anything. Each message in a notification is stored in the inbox
// before the answer is 200; one that cannot be stored makes it 500 (503
// while shutting down), and Meta delivers the notification again, whose
// messages already stored are recognised by their id.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		a.handshake(w, r)
	case http.MethodPost:
		a.notification(w, r)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// handshake answers Meta's verification request.
func (a *Adapter) handshake(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("hub.verify_token")
	if q.Get("hub.mode") != "subscribe" || a.cfg.VerifyToken == "" ||
		subtle.ConstantTimeCompare([]byte(token), []byte(a.cfg.VerifyToken)) != 1 {
		a.log.Warn("whatsapp: a webhook verification was refused; the verify token in the App Dashboard must equal whatsapp.verify_token", "remote", r.RemoteAddr)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, q.Get("hub.challenge"))
}

// notification checks, reads and stores one POST.
func (a *Adapter) notification(w http.ResponseWriter, r *http.Request) {
	sig := r.Header.Get("X-Hub-Signature-256")
	if !strings.HasPrefix(sig, "sha256=") {
		a.log.Warn("whatsapp: an unsigned webhook request was refused", "remote", r.RemoteAddr)
		http.Error(w, "unsigned request", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			a.log.Warn("whatsapp: a webhook request larger than the most taken was refused", "remote", r.RemoteAddr, "max_bytes", MaxBody)
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "unreadable request", http.StatusBadRequest)
		return
	}
	if !bridge.HubSigned(a.cfg.AppSecret, body, sig) {
		a.log.Warn("whatsapp: a webhook request with a wrong signature was refused; check whatsapp.app_secret", "remote", r.RemoteAddr)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	var n payload
	if err := json.Unmarshal(body, &n); err != nil {
		a.log.Warn("whatsapp: a signed webhook request is not a JSON notification", "err", err)
		http.Error(w, "not a JSON notification", http.StatusBadRequest)
		return
	}
	if n.Object != "whatsapp_business_account" {
		a.log.Debug("whatsapp: a notification of another object; ignored", "object", n.Object)
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := a.take(r.Context(), n); err != nil {
		if errors.Is(err, bridge.ErrStopped) {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		a.log.Error("whatsapp: a notification could not be stored; Meta will deliver it again", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// take stores what a notification brings for this number: its messages
// and the statuses of the messages sent. It stops at the first that
// cannot be stored.
func (a *Adapter) take(ctx context.Context, n payload) error {
	for _, e := range n.Entry {
		for _, c := range e.Changes {
			if c.Field != "messages" {
				continue
			}
			v := c.Value
			if v.Metadata.PhoneNumberID != a.cfg.PhoneNumberID {
				a.log.Debug("whatsapp: a notification for another number; ignored", "phone_number_id", v.Metadata.PhoneNumberID)
				continue
			}
			names := map[string]string{}
			for _, ct := range v.Contacts {
				names[ct.WaID] = ct.Profile.Name
			}
			for _, m := range v.Messages {
				if err := a.message(ctx, m, names[m.From]); err != nil {
					return err
				}
			}
			for _, s := range v.Statuses {
				if err := a.status(ctx, s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// payload is a webhook notification, as much of it as the channel reads.
type payload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value value  `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type value struct {
	Metadata struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []struct {
		WaID    string `json:"wa_id"`
		Profile struct {
			Name string `json:"name"`
		} `json:"profile"`
	} `json:"contacts"`
	Messages []message `json:"messages"`
	Statuses []status  `json:"statuses"`
}

// message is a person's message.
type message struct {
	From      string `json:"from"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Context   *struct {
		From string `json:"from"`
		ID   string `json:"id"`
	} `json:"context"`
	Text *struct {
		Body string `json:"body"`
	} `json:"text"`
	Image    *mediaRef `json:"image"`
	Document *mediaRef `json:"document"`
	Audio    *mediaRef `json:"audio"`
	Video    *mediaRef `json:"video"`
	Sticker  *mediaRef `json:"sticker"`
	Location *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
		Address   string  `json:"address"`
	} `json:"location"`
	Contacts []struct {
		Name struct {
			FormattedName string `json:"formatted_name"`
		} `json:"name"`
		Phones []struct {
			Phone string `json:"phone"`
		} `json:"phones"`
	} `json:"contacts"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply"`
	} `json:"interactive"`
	Button *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button"`
}

// mediaRef is a file in a message: its media id and what is stated of it.
type mediaRef struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
	Voice    bool   `json:"voice"`
}

// status is news of a message the bot sent.
type status struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Timestamp   string `json:"timestamp"`
	RecipientID string `json:"recipient_id"`
	Errors      []struct {
		Code      int    `json:"code"`
		Title     string `json:"title"`
		Message   string `json:"message"`
		ErrorData struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"errors"`
}
