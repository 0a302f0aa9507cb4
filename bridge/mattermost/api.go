package mattermost

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
	"net/url"
	"strconv"
	"time"

	"loadout/backoff"
)

// api calls the REST API v4 with the bot's token.
type api struct {
	base   string // ".../api/v4"
	token  string
	client *http.Client
	sleep  func(ctx context.Context, d time.Duration) error
	log    *slog.Logger
}

// maxResponse caps a JSON answer of the API: a page of 200 posts of
// 16,383 characters each stays well under it.
const maxResponse = 16 << 20

// apiError is an answer of the API other than 2xx: its status and
// Mattermost's error id ("api.context.session_expired.app_error").
type apiError struct {
	Status int
	ID     string
	after  time.Duration // Retry-After / X-Ratelimit-Reset, for a 429
}

func (e *apiError) Error() string {
	return fmt.Sprintf("mattermost: the server answered %d %s", e.Status, e.ID)
}

// rejected reports a request refused for its token.
func rejected(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// retryable reports an error worth trying again: the server unreachable,
// failing or limiting the rate, not refusing the request.
func retryable(err error) (bool, time.Duration) {
	var e *apiError
	if errors.As(err, &e) {
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests, e.after
	}
	var syntax *json.SyntaxError
	return !errors.As(err, &syntax), 0
}

// user is a Mattermost account.
type user struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	IsBot    bool   `json:"is_bot"`
}

// post is a post, as the API and the websocket give it.
type post struct {
	ID        string         `json:"id"`
	CreateAt  int64          `json:"create_at"`
	DeleteAt  int64          `json:"delete_at"`
	UserID    string         `json:"user_id"`
	ChannelID string         `json:"channel_id"`
	RootID    string         `json:"root_id"`
	Message   string         `json:"message"`
	Type      string         `json:"type"`
	Props     map[string]any `json:"props"`
	FileIDs   []string       `json:"file_ids"`
	Metadata  struct {
		Files []fileInfo `json:"files"`
	} `json:"metadata"`
}

// fileInfo describes a file of a post.
type fileInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
	Size     int64  `json:"size"`
}

// channelInfo is a channel the bot is a member of.
type channelInfo struct {
	ID         string `json:"id"`
	Type       string `json:"type"` // D, G, O or P
	LastPostAt int64  `json:"last_post_at"`
}

// postList is a page of a channel's posts.
type postList struct {
	Order []string         `json:"order"`
	Posts map[string]*post `json:"posts"`
}

// call sends one request, JSON in and out (in and out may be nil), and
// reads the answer into out. It does not retry.
func (c *api) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.do(req, out)
}

// do sends req with the token and reads a JSON answer into out.
func (c *api) do(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			ID string `json:"id"`
		}
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		ae := &apiError{Status: resp.StatusCode, ID: e.ID}
		if resp.StatusCode == http.StatusTooManyRequests {
			ae.after = backoff.RetryAfter(resp.Header)
			if reset, err := strconv.Atoi(resp.Header.Get("X-Ratelimit-Reset")); err == nil && ae.after == 0 {
				ae.after = time.Duration(reset) * time.Second
			}
		}
		return ae
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(out)
}

// retry runs fn while the server cannot be reached, fails or limits
// the rate, up to four times; anything else is final.
func (c *api) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	p := backoff.Policy{Attempts: 4, Initial: 500 * time.Millisecond, Max: 10 * time.Second, Sleep: c.sleep}
	return p.Do(ctx, retryable, fn)
}

// user reads an account.
func (c *api) user(ctx context.Context, id string) (user, error) {
	var u user
	err := c.call(ctx, http.MethodGet, "/users/"+url.PathEscape(id), nil, &u)
	return u, err
}

// channels lists the channels the bot is a member of, in every team and
// its direct messages.
func (c *api) channels(ctx context.Context) ([]channelInfo, error) {
	var out []channelInfo
	err := c.call(ctx, http.MethodGet, "/users/me/channels", nil, &out)
	return out, err
}

// postsAfter reads a page of a channel's posts after post id (its
// oldest first), or its latest page when id is "".
func (c *api) postsAfter(ctx context.Context, channel, id string, perPage int) ([]*post, error) {
	q := url.Values{"per_page": {strconv.Itoa(perPage)}}
	if id != "" {
		q.Set("after", id)
	}
	var list postList
	if err := c.call(ctx, http.MethodGet, "/channels/"+url.PathEscape(channel)+"/posts?"+q.Encode(), nil, &list); err != nil {
		return nil, err
	}
	out := make([]*post, 0, len(list.Posts))
	for _, p := range list.Posts {
		if p != nil && p.ID != "" {
			out = append(out, p)
		}
	}
	sortPosts(out)
	return out, nil
}

// createPost creates a post and returns its id.
func (c *api) createPost(ctx context.Context, p newPost) (string, error) {
	var out post
	if err := c.call(ctx, http.MethodPost, "/posts", p, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("mattermost: a created post came back without its id")
	}
	return out.ID, nil
}

// newPost is a post the bot creates.
type newPost struct {
	ChannelID string         `json:"channel_id"`
	RootID    string         `json:"root_id,omitempty"`
	Message   string         `json:"message"`
	FileIDs   []string       `json:"file_ids,omitempty"`
	Props     map[string]any `json:"props,omitempty"`
	// PendingID makes the server answer a post created again (after a
	// lost answer) with the first one.
	PendingID string `json:"pending_post_id,omitempty"`
}

// patchPost changes a post's message, when not "", and its props, when
// not nil.
func (c *api) patchPost(ctx context.Context, id, message string, props map[string]any) error {
	in := map[string]any{}
	if message != "" {
		in["message"] = message
	}
	if props != nil {
		in["props"] = props
	}
	return c.call(ctx, http.MethodPut, "/posts/"+url.PathEscape(id)+"/patch", in, nil)
}

// upload uploads a file to a channel and returns its id, to post.
func (c *api) upload(ctx context.Context, channel, name string, r io.Reader) (string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	w.WriteField("channel_id", channel)
	part, err := w.CreateFormFile("files", name)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(part, r); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/files", &buf)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	var out struct {
		FileInfos []fileInfo `json:"file_infos"`
	}
	if err := c.do(req, &out); err != nil {
		return "", err
	}
	if len(out.FileInfos) != 1 || out.FileInfos[0].ID == "" {
		return "", errors.New("mattermost: an uploaded file came back without its id")
	}
	return out.FileInfos[0].ID, nil
}

// download opens a file of a post, the caller closes it.
func (c *api) download(ctx context.Context, id string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/files/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &apiError{Status: resp.StatusCode}
	}
	return resp.Body, nil
}
