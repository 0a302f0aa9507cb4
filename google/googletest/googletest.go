// Package googletest provides a google.Client for group tests: every
// person in Connected gets options pointing at a fake server.
package googletest

import (
	"context"
	"net/http"

	"google.golang.org/api/option"

	"loadout/google"
	"loadout/tools"
)

var _ google.Client = (*Client)(nil)

// Client is a google.Client over a fake server. Requests carry the header
// X-Test-User with the caller's user key, so a fake can check whose
// mailbox a call reaches.
type Client struct {
	// Endpoint is the fake server's base URL (httptest.Server.URL).
	Endpoint string
	// Connected lists the user keys that have an account; nil means all.
	Connected map[string]bool
}

// Options implements google.Client.
func (c *Client) Options(ctx context.Context, svc google.Service) ([]option.ClientOption, error) {
	user := tools.CallerFrom(ctx).UserKey
	if c.Connected != nil && !c.Connected[user] {
		return nil, google.NotConnected("")
	}
	hc := &http.Client{Transport: userHeader{user: user}}
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if e := google.EndpointOption(c.Endpoint, svc); e != nil {
		opts = append(opts, e)
	}
	return opts, nil
}

type userHeader struct{ user string }

func (u userHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-User", u.user)
	return http.DefaultTransport.RoundTrip(r)
}
