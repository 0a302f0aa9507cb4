package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"

	"loadout/tools"
)

// maxResults is how many search results come back.
const maxResults = 8

// result is one search hit.
type result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

type results struct {
	Query   string   `json:"query"`
	Source  string   `json:"source"`
	Results []result `json:"results"`
}

func (w *webTool) search(ctx context.Context, q string) (any, error) {
	switch {
	case w.cfg.SearXNGURL != "":
		return w.searxng(ctx, q)
	case w.cfg.BraveAPIKey != "":
		return w.brave(ctx, q)
	}
	return nil, &tools.Error{Code: "not_configured", Message: "Web search is not set up here.",
		Suggestion: "Fetch a URL you know instead (fetch works), and tell the person the operator can set web.searxng_url or web.brave_api_key."}
}

func (w *webTool) searxng(ctx context.Context, q string) (any, error) {
	u, err := url.Parse(strings.TrimRight(w.cfg.SearXNGURL, "/") + "/search")
	if err != nil {
		return nil, fmt.Errorf("web.searxng_url: %w", err)
	}
	u.RawQuery = url.Values{"q": {q}, "format": {"json"}}.Encode()
	var body struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := w.getJSON(ctx, u.String(), nil, "SearXNG", &body); err != nil {
		return nil, err
	}
	out := results{Query: q, Source: "searxng", Results: []result{}}
	for _, r := range body.Results {
		if len(out.Results) == maxResults {
			break
		}
		out.Results = append(out.Results, result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}

func (w *webTool) brave(ctx context.Context, q string) (any, error) {
	u, err := url.Parse(w.cfg.BraveURL)
	if err != nil {
		return nil, fmt.Errorf("web.brave_url: %w", err)
	}
	u.RawQuery = url.Values{"q": {q}, "count": {fmt.Sprint(maxResults)}}.Encode()
	var body struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	h := http.Header{"X-Subscription-Token": {w.cfg.BraveAPIKey}}
	if err := w.getJSON(ctx, u.String(), h, "Brave Search", &body); err != nil {
		return nil, err
	}
	out := results{Query: q, Source: "brave", Results: []result{}}
	for _, r := range body.Web.Results {
		if len(out.Results) == maxResults {
			break
		}
		out.Results = append(out.Results, result{Title: r.Title, URL: r.URL, Snippet: stripTags(r.Description)})
	}
	return out, nil
}

// getJSON asks a search backend. Its failures are the operator's to fix,
// so the model gets a plain unavailable and the log the detail.
func (w *webTool) getJSON(ctx context.Context, u string, h http.Header, name string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := w.cfg.SearchClient.Do(req)
	if err != nil {
		if ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded {
			return ctx.Err()
		}
		return &tools.Error{Code: tools.CodeUnavailable, Message: name + " could not be reached.", Suggestion: "Try again later, or fetch a URL you know."}
	}
	defer resp.Body.Close()
	body, _, err := readCapped(resp.Body, 2<<20)
	if err != nil || resp.StatusCode != http.StatusOK {
		return &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("%s answered %s.", name, resp.Status),
			Suggestion: "Try again later, or fetch a URL you know."}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &tools.Error{Code: tools.CodeUnavailable, Message: name + " gave an answer that could not be read.",
			Suggestion: "Try again later, or fetch a URL you know."}
	}
	return nil
}

// stripTags drops the <strong> marks Brave puts in snippets.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func htmlOptions(base *url.URL) []converter.ConvertOptionFunc {
	if base == nil {
		return nil
	}
	return []converter.ConvertOptionFunc{converter.WithDomain(base.Scheme + "://" + base.Host)}
}
