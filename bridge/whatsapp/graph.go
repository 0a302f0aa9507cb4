package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"time"

	"loadout/backoff"
	"loadout/bridge"
)

// graph calls the Graph API with the access token, for one business
// number. It is safe for concurrent use.
type graph struct {
	base, token, phone string
	client             *http.Client
	sleep              func(ctx context.Context, d time.Duration) error
	log                *slog.Logger
	observer           bridge.Observer
}

// APIError is an error the Graph API answered with.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Code and Subcode are Meta's error codes (190: the token; 131047:
	// outside the customer-service window; 131056: too many messages to
	// one person; 130429: too many messages a second).
	Code    int
	Subcode int
	Message string
	// Details is error_data.details, which says more.
	Details string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("whatsapp: the Graph API answered %d", e.Status)
	if e.Code != 0 {
		s += fmt.Sprintf(" (code %d)", e.Code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Details != "" {
		s += " — " + e.Details
	}
	return s
}

// Meta's error codes the channel acts on.
const (
	codeToken       = 190    // the access token is invalid or expired
	codeWindow      = 131047 // more than 24 hours since the person's last message
	codePairRate    = 131056 // too many messages to one person
	codeThroughput  = 130429 // too many messages a second
	codeRateLimit   = 80007  // the account's call rate
	codeTooMany     = 4      // the app's call rate
	codeUnavailable = 131016 // the service is unavailable
	codeUnknown     = 131000 // something went wrong
	codeTemporary   = 2      // a temporary failure
)

// retryable reports whether a failed call may work if made again, and
// how long the API asked to wait.
func retryable(err error) (bool, time.Duration) {
	var ae *APIError
	if !errors.As(err, &ae) {
		// The network: nothing was answered.
		return !errors.Is(err, errUnreadable), 0
	}
	switch ae.Code {
	case codePairRate, codeThroughput, codeRateLimit, codeTooMany, codeUnavailable, codeUnknown, codeTemporary:
		return true, 0
	}
	return ae.Status == http.StatusTooManyRequests || ae.Status >= 500, 0
}

var errUnreadable = errors.New("whatsapp: the Graph API's answer could not be read")

// policy is how often and how long a call is tried.
func (g *graph) policy() backoff.Policy {
	return backoff.Policy{Attempts: 5, Initial: 500 * time.Millisecond, Max: 20 * time.Second, Jitter: 0.2, Sleep: g.sleep,
		OnRetry: func(err error, wait time.Duration) {
			g.observer.Retried("whatsapp")
			g.log.Warn("whatsapp: the Graph API call failed; trying again", "wait", wait, "err", err)
		}}
}

// do makes one request to path (under the versioned base) or to a full
// URL, and decodes a JSON answer into out (when not nil). A status
// other than 2xx is an *APIError.
func (g *graph) do(ctx context.Context, method, target, contentType string, body []byte, out any) error {
	u := target
	if !isURL(target) {
		u = g.base + target
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return scrub(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return scrub(err)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w: %w", errUnreadable, err)
	}
	return nil
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

// scrub drops the request's URL from a transport error: it is logged,
// and a URL is no business of a log line.
func scrub(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("whatsapp: %s request: %w", ue.Op, ue.Err)
	}
	return err
}

// apiError reads the Graph API's error answer.
func apiError(status int, raw []byte) *APIError {
	var e struct {
		Error struct {
			Message   string `json:"message"`
			Code      int    `json:"code"`
			Subcode   int    `json:"error_subcode"`
			ErrorData struct {
				Details string `json:"details"`
			} `json:"error_data"`
		} `json:"error"`
	}
	ae := &APIError{Status: status}
	if json.Unmarshal(raw, &e) == nil {
		ae.Code, ae.Subcode, ae.Message, ae.Details = e.Error.Code, e.Error.Subcode, e.Error.Message, e.Error.ErrorData.Details
	}
	return ae
}

// call is do, tried again while it fails in a way that may pass.
func (g *graph) call(ctx context.Context, method, target, contentType string, body []byte, out any) error {
	return g.policy().Do(ctx, retryable, func(ctx context.Context) error {
		return g.do(ctx, method, target, contentType, body, out)
	})
}

// identify checks the token and the number: the number's own record.
// While the API is unreachable it keeps trying; a refusal stops it.
func (g *graph) identify(ctx context.Context) error {
	var me struct {
		Display string `json:"display_phone_number"`
		Name    string `json:"verified_name"`
	}
	p := g.policy()
	p.Attempts, p.Max, p.OnRetry = 0, time.Minute, nil
	err := p.Do(ctx, func(err error) (bool, time.Duration) {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
			return false, 0
		}
		return true, 0
	}, func(ctx context.Context) error {
		err := g.do(ctx, http.MethodGet, url.PathEscape(g.phone)+"?fields=display_phone_number,verified_name", "", nil, &me)
		if err != nil && ctx.Err() == nil {
			if _, final := errors.AsType[*APIError](err); !final {
				g.log.Warn("whatsapp: the Graph API is not reachable yet; retrying", "err", err)
			}
		}
		return err
	})
	if ae, ok := errors.AsType[*APIError](err); ok {
		if ae.Status == http.StatusUnauthorized || ae.Code == codeToken {
			return fmt.Errorf("whatsapp: Meta rejected whatsapp.access_token (%s): check the token (a system user's, with whatsapp_business_messaging)", ae.Message)
		}
		return fmt.Errorf("whatsapp: Meta refused to show whatsapp.phone_number_id %s (%s): check it is the number's id from WhatsApp → API Setup, and that the token may use it", g.phone, ae.Message)
	}
	if err != nil {
		return err
	}
	g.log.Info("whatsapp number identified", "number", me.Display, "name", me.Name)
	return nil
}

// sent is the messages endpoint's answer.
type sent struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
}

// message sends one message (m is its type's fields, with "type") to
// the person to and returns its id (wamid).
func (g *graph) message(ctx context.Context, to string, m map[string]any) (string, error) {
	m["messaging_product"] = "whatsapp"
	m["recipient_type"] = "individual"
	m["to"] = to
	body, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	var out sent
	if err := g.call(ctx, http.MethodPost, url.PathEscape(g.phone)+"/messages", "application/json", body, &out); err != nil {
		return "", err
	}
	if len(out.Messages) == 0 || out.Messages[0].ID == "" {
		return "", fmt.Errorf("%w: no message id", errUnreadable)
	}
	return out.Messages[0].ID, nil
}

// read marks the person's message read and, with typing, shows
// "typing…" for up to 25 seconds or until the next message.
func (g *graph) read(ctx context.Context, msg string, typing bool) error {
	m := map[string]any{"messaging_product": "whatsapp", "status": "read", "message_id": msg}
	if typing {
		m["typing_indicator"] = map[string]string{"type": "text"}
	}
	body, _ := json.Marshal(m)
	return g.do(ctx, http.MethodPost, url.PathEscape(g.phone)+"/messages", "application/json", body, nil)
}

// Media is a media object as the Graph API describes it.
type media struct {
	URL      string   `json:"url"`
	MimeType string   `json:"mime_type"`
	Size     flexSize `json:"file_size"`
}

// flexSize reads a size given as a number or as a string of digits.
type flexSize int64

func (f *flexSize) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "" || s == "null" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("whatsapp: a size of %s", b)
	}
	*f = flexSize(n)
	return nil
}

// mediaInfo looks a media id up: where to download it, its type and
// stated size.
func (g *graph) mediaInfo(ctx context.Context, id string) (media, error) {
	var m media
	if err := g.do(ctx, http.MethodGet, url.PathEscape(id), "", nil, &m); err != nil {
		return m, err
	}
	if !isURL(m.URL) {
		return m, fmt.Errorf("%w: media %s has no download URL", errUnreadable, id)
	}
	return m, nil
}

// download opens a media object's content, held to limit bytes
// whatever size was stated. The access token goes with the request, as
// the media URLs require.
func (g *graph) download(ctx context.Context, u string, limit int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, scrub(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, apiError(resp.StatusCode, raw)
	}
	return struct {
		io.Reader
		io.Closer
	}{bridge.Capped(resp.Body, limit), resp.Body}, nil
}

// upload uploads a file to the number's media and returns its id.
func (g *graph) upload(ctx context.Context, name, mimeType string, r io.ReadSeeker) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := g.policy().Do(ctx, retryable, func(ctx context.Context) error {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		w.WriteField("messaging_product", "whatsapp")
		w.WriteField("type", mimeType)
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
		h.Set("Content-Type", mimeType)
		part, err := w.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := io.Copy(part, r); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return g.do(ctx, http.MethodPost, url.PathEscape(g.phone)+"/media", w.FormDataContentType(), body.Bytes(), &out)
	})
	if err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("%w: an upload without its id", errUnreadable)
	}
	return out.ID, nil
}
