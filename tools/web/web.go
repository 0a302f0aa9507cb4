// Package web provides the web tool (search and fetch) and http_request.
// Every request the model steers goes through a guard.Guard, so neither
// can reach loadout's own machine or private networks; the search
// backends are the operator's and are called directly.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	readability "codeberg.org/readeck/go-readability/v2"
	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"

	"loadout/tools"
	"loadout/tools/guard"
	pdfpkg "loadout/tools/pdf"
)

// Config configures the web tools. The zero value fetches through a
// guard that refuses every private address, with no search backend.
type Config struct {
	// AllowHosts lets intranet hosts, addresses and CIDR prefixes through
	// the guard that keeps the model's requests off private networks
	// (web.allow_hosts).
	AllowHosts []string `yaml:"allow_hosts"`
	// Guard checks every address the model can steer; default guard.New
	// with no allowlist.
	Guard *guard.Guard
	// SearXNGURL is a SearXNG instance's base URL (web.searxng_url); its
	// JSON format must be enabled.
	SearXNGURL string `yaml:"searxng_url" secret:"url"`
	// BraveAPIKey enables Brave Search (web.brave_api_key); used when no
	// SearXNG is set.
	BraveAPIKey string `yaml:"brave_api_key" secret:"true"`
	// BraveURL is Brave's endpoint; default DefaultBraveURL.
	BraveURL string `yaml:"brave_url" secret:"url"`
	// MaxBytes caps a download (web.max_bytes); default 5 MB.
	MaxBytes int64 `yaml:"max_bytes"`
	// Timeout caps a fetch or search (web.timeout); default 20s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxChars caps the text a call returns (web.max_chars); the rest is
	// had with offset. Default 20000.
	MaxChars int `yaml:"max_chars"`
	// SearchClient calls the search backends; default http.DefaultClient.
	SearchClient *http.Client `yaml:"-"`
	// PDF bounds the worker a fetched PDF is read in; loadout gives the
	// pdf tools' limits and places (pdf.limits, pdf.max_workers).
	PDF pdfpkg.Limits `yaml:"-"`
}

// DefaultBraveURL is Brave Search's web search endpoint.
const DefaultBraveURL = "https://api.search.brave.com/res/v1/web/search"

// userAgent names loadout to the sites it fetches from.
const userAgent = "loadout/1 (+https://github.com/loadout; an assistant fetching a page for a person)"

// maxRedirects bounds the redirects followed within one host.
const maxRedirects = 5

func (c *Config) setDefaults() error {
	if c.Guard == nil {
		g, err := guard.New(guard.Config{})
		if err != nil {
			return err
		}
		c.Guard = g
	}
	if c.BraveURL == "" {
		c.BraveURL = DefaultBraveURL
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 5 << 20
	}
	if c.Timeout <= 0 {
		c.Timeout = 20 * time.Second
	}
	if c.MaxChars <= 0 {
		c.MaxChars = 20000
	}
	if c.SearchClient == nil {
		c.SearchClient = http.DefaultClient
	}
	return nil
}

type webInput struct {
	Action string `json:"action" enum:"search,fetch"`
	Query  string `json:"query,omitempty" desc:"search: words"`
	URL    string `json:"url,omitempty" desc:"fetch: the page" reach:"url"`
	Offset int    `json:"offset,omitempty" desc:"fetch: read on from here"`
}

// Tools returns the web tool and http_request.
func Tools(cfg Config) ([]tools.Tool, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := &webTool{cfg: cfg, client: &http.Client{Transport: cfg.Guard.Transport(), Timeout: cfg.Timeout}}
	w.client.CheckRedirect = w.sameHost
	plain := &http.Client{Transport: w.client.Transport, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return []tools.Tool{
		tools.New(tools.Definition{
			Name:        "web",
			Examples:    []string{"what is the weather forecast", "the exchange rate or a price today", "a fact you can look up, like how tall a building is", "search the internet for something", "open a web page and read it", "look something up online", "latest news about a topic", "read the article at this link", "who is the president of France", "find out when the shop opens", "the latest score of the match", "search online for reviews of this laptop", "fetch this url and give me the main points", "what does this website say", "research the best flights to Rome", "how much does a tesla cost", "look on the internet for a recipe", "what's happening in the news today", "google it", "what's the population of Brazil", "find me the cheapest train to Madrid", "what does wikipedia say about it", "current price of bitcoin", "check the forecast for the weekend", "latest updates on the strike", "I'm wondering how tall the Eiffel tower is", "is it going to rain in Lisbon tomorrow", "what's the latest on the election"},
			Description: "Search the web or read a page (as Markdown).",
			Catchall:    true,
			ReadOnly:    true,
			Untrusted:   true, // pages and results are written by others
			Timeout:     cfg.Timeout + 5*time.Second,
		}, w.run),
		httpRequest(cfg, plain),
	}, nil
}

type webTool struct {
	cfg    Config
	client *http.Client
}

func (w *webTool) run(ctx context.Context, in webInput) (any, error) {
	switch in.Action {
	case "search":
		if strings.TrimSpace(in.Query) == "" {
			return nil, tools.MissingParameter("web", "search", "query")
		}
		return w.search(ctx, strings.TrimSpace(in.Query))
	case "fetch":
		if strings.TrimSpace(in.URL) == "" {
			return nil, tools.MissingParameter("web", "fetch", "url")
		}
		return w.fetch(ctx, strings.TrimSpace(in.URL), max(in.Offset, 0))
	}
	return nil, tools.UnknownAction("web", in.Action, "search", "fetch")
}

// sameHost follows redirects within the host asked for; one to another
// host is handed back to the model as a redirect result.
func (w *webTool) sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	if !strings.EqualFold(req.URL.Host, via[0].URL.Host) || req.URL.Scheme != via[0].URL.Scheme && req.URL.Scheme != "https" {
		return http.ErrUseLastResponse
	}
	return w.cfg.Guard.CheckURL(req.URL)
}

// page is a fetch result.
type page struct {
	URL         string `json:"url"`
	Title       string `json:"title,omitempty"`
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
	// TotalChars and NextOffset tell the model there is more.
	TotalChars int    `json:"total_chars"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

// redirect is the answer to a fetch redirected to another host.
type redirect struct {
	Status   string `json:"status"`
	Location string `json:"location"`
	Message  string `json:"message"`
}

func (w *webTool) fetch(ctx context.Context, raw string, offset int) (any, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a URL.", raw),
			Suggestion: "Give a full URL such as https://example.com/page."}
	}
	if err := w.cfg.Guard.CheckURL(u); err != nil {
		return nil, blocked(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' cannot be requested: %v", raw, err)}
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain,application/json,application/pdf;q=0.9,*/*;q=0.5")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, fetchFailed(ctx, raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc, err := resp.Location()
		if err != nil {
			return nil, &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("%s redirects without saying where.", raw)}
		}
		return redirect{Status: "redirect", Location: loc.String(),
			Message: "The page moved to another site. Fetch the location if it is what the person wants."}, nil
	}
	if resp.StatusCode >= 400 {
		return nil, &tools.Error{Code: httpCode(resp.StatusCode), Message: fmt.Sprintf("%s answered %s.", raw, resp.Status),
			Suggestion: "Check the URL, or search for the page."}
	}
	body, cut, err := readCapped(resp.Body, w.cfg.MaxBytes)
	if err != nil {
		return nil, fetchFailed(ctx, raw, err)
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ctype == "" {
		ctype = http.DetectContentType(body)
		ctype, _, _ = mime.ParseMediaType(ctype)
	}
	title, text, err := toText(ctx, w.cfg.PDF, ctype, body, resp.Request.URL)
	if err != nil {
		return nil, err
	}
	p := page{URL: resp.Request.URL.String(), Title: title, ContentType: ctype}
	p.Content, p.TotalChars, p.NextOffset = tools.Window(text, offset, w.cfg.MaxChars)
	switch {
	case p.NextOffset > 0:
		p.Note = fmt.Sprintf("This is characters %d to %d of %d. Fetch again with offset %d for the next part.",
			offset, p.NextOffset, p.TotalChars, p.NextOffset)
	case offset > 0 && offset >= p.TotalChars:
		p.Note = fmt.Sprintf("The page has %d characters; offset %d is past its end.", p.TotalChars, offset)
	}
	if cut {
		p.Note = strings.TrimSpace(p.Note + fmt.Sprintf(" The download stopped at %d bytes; the page is longer.", w.cfg.MaxBytes))
	}
	return p, nil
}

// toText turns a body into text by its type: HTML into Markdown of its
// readable part, PDF into its text, JSON and plain text as they are.
func toText(ctx context.Context, l pdfpkg.Limits, ctype string, body []byte, base *url.URL) (title, text string, err error) {
	switch {
	case ctype == "text/html" || ctype == "application/xhtml+xml":
		return htmlText(body, base)
	case ctype == "application/pdf":
		text, err := pdfText(ctx, l, body)
		var te *tools.Error
		if errors.As(err, &te) {
			return "", "", te
		}
		if err != nil {
			return "", "", &tools.Error{Code: tools.CodeInvalidArgument, Message: "The PDF could not be read: " + err.Error()}
		}
		return "", text, nil
	case ctype == "application/json" || strings.HasSuffix(ctype, "+json"):
		var out bytes.Buffer
		if json.Indent(&out, body, "", "  ") == nil {
			return "", out.String(), nil
		}
		return "", strings.ToValidUTF8(string(body), "�"), nil
	case strings.HasPrefix(ctype, "text/"), ctype == "application/xml", strings.HasSuffix(ctype, "+xml"):
		return "", strings.ToValidUTF8(string(body), "�"), nil
	}
	return "", "", &tools.Error{Code: "unsupported_type", Message: fmt.Sprintf("The page is %s, which cannot be read as text.", ctype),
		Suggestion: "Fetch a web page, a text or JSON document, or a PDF."}
}

func htmlText(body []byte, base *url.URL) (string, string, error) {
	article, err := readability.FromReader(bytes.NewReader(body), base)
	var html bytes.Buffer
	if err == nil && article.Node != nil {
		err = article.RenderHTML(&html)
	}
	if err != nil || strings.TrimSpace(html.String()) == "" {
		// No article found: the whole page.
		html.Reset()
		html.Write(body)
	}
	md, err := htmltomarkdown.ConvertString(html.String(), htmlOptions(base)...)
	if err != nil {
		return "", "", &tools.Error{Code: tools.CodeInvalidArgument, Message: "The page's HTML could not be read."}
	}
	title := ""
	if article.Node != nil {
		title = article.Title()
	}
	return title, strings.TrimSpace(md), nil
}

// pdfText is a PDF's text, read with the pdf group's bounded reader.
func pdfText(ctx context.Context, l pdfpkg.Limits, body []byte) (string, error) {
	return pdfpkg.Text(ctx, body, "the PDF", maxPDFChars, l)
}

// maxPDFChars bounds the text taken from a fetched PDF; the result is cut
// again to web.max_chars.
const maxPDFChars = 200000

// readCapped reads at most limit bytes and reports whether there was more.
func readCapped(r io.Reader, limit int64) ([]byte, bool, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > limit {
		return body[:limit], true, nil
	}
	return body, false, nil
}

// blocked is the guard's refusal as the model sees it.
func blocked(err error) *tools.Error {
	return &tools.Error{Code: "blocked_address", Message: err.Error(),
		Suggestion: "Only public web addresses can be reached. Tell the person if they need an internal one: the operator can allow it in web.allow_hosts."}
}

func fetchFailed(ctx context.Context, raw string, err error) error {
	switch {
	case guard.IsBlocked(err):
		return blocked(err)
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return &tools.Error{Code: tools.CodeTimeout, Message: fmt.Sprintf("%s did not answer in time.", raw), Suggestion: "Try again later or another source."}
	}
	return &tools.Error{Code: tools.CodeUnavailable, Message: fmt.Sprintf("%s could not be reached.", raw),
		Suggestion: "Check the address, or search for the page."}
}

func httpCode(status int) string {
	switch status {
	case http.StatusNotFound, http.StatusGone:
		return tools.CodeNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return tools.CodePermission
	}
	if status >= 500 || status == http.StatusTooManyRequests {
		return tools.CodeUnavailable
	}
	return tools.CodeInvalidArgument
}

// Register adds web as a core tool — looking something up is common
// enough to pay for its schema every turn — and http_request as the http
// group.
func Register(reg *tools.Registry, cfg Config) error {
	ts, err := Tools(cfg)
	if err != nil {
		return err
	}
	if err := reg.Add(ts[0]); err != nil {
		return err
	}
	return reg.AddGroup(tools.Group{Name: "http", DisplayName: "HTTP", Description: "Call an HTTP API"}, ts[1:]...)
}
