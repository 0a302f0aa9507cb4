package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"loadout/tools"
	"loadout/tools/guard"
)

// Fetcher downloads a document from a URL the model gave (a PDF to
// read), through the guard, following redirects only within the host,
// up to 50 MB.
func Fetcher(g *guard.Guard, timeout time.Duration) func(ctx context.Context, url string) ([]byte, error) {
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	client := &http.Client{Transport: g.Transport(), Timeout: timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return func(ctx context.Context, raw string) ([]byte, error) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a URL.", raw)}
		}
		if err := g.CheckURL(u); err != nil {
			return nil, &tools.Error{Code: "blocked_address", Message: err.Error()}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: err.Error()}
		}
		resp, err := client.Do(req)
		if err != nil {
			if guard.IsBlocked(err) {
				return nil, &tools.Error{Code: "blocked_address", Message: err.Error()}
			}
			return nil, &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("%s could not be reached.", u.Redacted())}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("%s answered %s.", u.Redacted(), resp.Status)}
		}
		return io.ReadAll(io.LimitReader(resp.Body, 50<<20+1))
	}
}
