package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"loadout/tools"
)

type httpInput struct {
	Method  string            `json:"method" enum:"GET,POST,PUT,PATCH,DELETE,HEAD" desc:"HTTP method"`
	URL     string            `json:"url" desc:"http(s) URL of the API the person named" reach:"url"`
	Headers map[string]string `json:"headers,omitempty" desc:"request headers, e.g. Authorization the person gave"`
	Body    string            `json:"body,omitempty" desc:"request body, e.g. JSON"`
}

type httpOutput struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body"`
	TotalChars int               `json:"total_chars"`
	Note       string            `json:"note,omitempty"`
}

// refusedHeaders are set by the transport or would let a request pose as
// another; the model may not set them.
var refusedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// shownHeaders are the response headers the model gets.
var shownHeaders = []string{"Content-Type", "Location", "Retry-After", "Link", "Etag", "Last-Modified", "X-Ratelimit-Remaining"}

// httpRequest is http_request: one request to an API the person names,
// through the guard, without following redirects and without any
// credential of loadout's own (only the headers given).
func httpRequest(cfg Config, client *http.Client) tools.Tool {
	return tools.New(tools.Definition{
		Name:        "http_request",
		Examples:    []string{"call a REST API", "send a POST with JSON to a url", "GET an endpoint and show the response", "hit a webhook", "query our backend with a GET request", "post data to this url", "ping the health check endpoint", "send a PUT to the API with this body", "fetch the raw JSON from the service", "make an API call", "test our REST endpoint", "call this url with a header", "hit our status page API and show me the result"},
		Description: "Call a public HTTP API the person names; no redirects followed.",
		// What a service answers is not the person's words.
		Untrusted: true,
		// Anything but a read sends data somewhere on the person's behalf.
		EffectFor: tools.By(func(_ context.Context, in httpInput) tools.Effect {
			switch strings.ToUpper(in.Method) {
			case http.MethodGet, http.MethodHead:
				return tools.EffectMutate
			}
			return tools.EffectDestructive
		}),
		Summarize: tools.By(func(_ context.Context, in httpInput) string {
			// Where it goes in full (host and path, as the request will
			// use them); the query, each header's value and the body
			// whole up to tools.Whole's limit, and past it every URL,
			// host, address and number the cut hides: what is sent is
			// what is shown.
			s := strings.ToUpper(in.Method) + " "
			if u, err := url.Parse(strings.TrimSpace(in.URL)); err == nil && u.Host != "" {
				s += u.Scheme + "://" + u.Host + u.EscapedPath()
				if q := u.RawQuery; q != "" {
					if len([]rune(q)) <= tools.WholeChars {
						s += "?" + q
					} else {
						s += "?" + tools.Whole(q)
					}
				}
			} else {
				s += tools.Whole(in.URL)
			}
			if len(in.Headers) > 0 {
				names := make([]string, 0, len(in.Headers))
				for k := range in.Headers {
					names = append(names, k)
				}
				sort.Strings(names)
				for i, k := range names {
					names[i] = k + ": " + tools.Whole(in.Headers[k])
				}
				s += " with the headers " + strings.Join(names, ", ")
			}
			if in.Body != "" {
				s += " with the body " + tools.Whole(in.Body)
			}
			return s
		}),
		Timeout: cfg.Timeout + 5*time.Second,
	}, func(ctx context.Context, in httpInput) (any, error) {
		u, err := url.Parse(strings.TrimSpace(in.URL))
		if err != nil || u.Host == "" {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a URL.", in.URL),
				Suggestion: "Give a full URL such as https://api.example.com/v1/items."}
		}
		if err := cfg.Guard.CheckURL(u); err != nil {
			return nil, blocked(err)
		}
		method := strings.ToUpper(in.Method)
		var body *strings.Reader
		if in.Body != "" {
			if method == http.MethodGet || method == http.MethodHead {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: method + " requests carry no body.",
					Suggestion: "Drop the body, or use POST, PUT or PATCH."}
			}
			body = strings.NewReader(in.Body)
		}
		var req *http.Request
		if body != nil {
			req, err = http.NewRequestWithContext(ctx, method, u.String(), body)
		} else {
			req, err = http.NewRequestWithContext(ctx, method, u.String(), nil)
		}
		if err != nil {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: err.Error()}
		}
		req.Header.Set("User-Agent", userAgent)
		for k, v := range in.Headers {
			ck := http.CanonicalHeaderKey(strings.TrimSpace(k))
			if refusedHeaders[ck] || strings.ContainsAny(k+v, "\r\n") {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("The header '%s' cannot be set.", k),
					Suggestion: "Leave it out: the connection sets it."}
			}
			req.Header.Set(ck, v)
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fetchFailed(ctx, u.Redacted(), err)
		}
		defer resp.Body.Close()
		data, cut, err := readCapped(resp.Body, cfg.MaxBytes)
		if err != nil {
			return nil, fetchFailed(ctx, u.Redacted(), err)
		}
		text := strings.ToValidUTF8(string(data), "�")
		out := httpOutput{Status: resp.StatusCode, Headers: map[string]string{}}
		out.Body, out.TotalChars, _ = tools.Window(text, 0, cfg.MaxChars)
		for _, h := range shownHeaders {
			if v := resp.Header.Get(h); v != "" {
				out.Headers[h] = v
			}
		}
		var notes []string
		if out.TotalChars > cfg.MaxChars {
			notes = append(notes, fmt.Sprintf("The body has %d characters; the first %d are above.", out.TotalChars, cfg.MaxChars))
		}
		if cut {
			notes = append(notes, fmt.Sprintf("The download stopped at %d bytes.", cfg.MaxBytes))
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			notes = append(notes, "A redirect: call the Location again if it is what the person wants.")
		}
		sort.Strings(notes)
		out.Note = strings.Join(notes, " ")
		return out, nil
	})
}
