package google_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/tools"
)

type failingClient struct{ err error }

func (f failingClient) Options(context.Context, google.Service) ([]option.ClientOption, error) {
	return nil, f.err
}

func TestNewServicePassesClientErrorAsIs(t *testing.T) {
	want := google.NotConnected("")
	called := false
	_, err := google.NewService(context.Background(), failingClient{err: want}, gmailSvc, "x",
		func(context.Context, ...option.ClientOption) (*int, error) { called = true; return new(int), nil })
	if err != want {
		t.Fatalf("err = %v, want the client's error unchanged", err)
	}
	if called {
		t.Fatal("service built although the client failed")
	}
}

func TestNewServiceWrapsBuildError(t *testing.T) {
	boom := errors.New("boom")
	c := &googletest.Client{Endpoint: "http://127.0.0.1:1"}
	ctx := tools.WithCaller(context.Background(), tools.Caller{UserKey: "console:local"})
	_, err := google.NewService(ctx, c, gmailSvc, "gmail: client",
		func(context.Context, ...option.ClientOption) (*int, error) { return nil, boom })
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "gmail: client: ") {
		t.Fatalf("err = %v, want boom wrapped with the prefix", err)
	}
}

func TestClientsReturnNoNilOption(t *testing.T) {
	ctx := tools.WithCaller(context.Background(), tools.Caller{UserKey: "console:local"})
	for _, endpoint := range []string{"", "http://127.0.0.1:1"} {
		opts, err := (&googletest.Client{Endpoint: endpoint}).Options(ctx, gmailSvc)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range opts {
			if o == nil {
				t.Fatalf("endpoint %q: option %d is nil", endpoint, i)
			}
		}
	}
}

func TestMapErrorKeepsInternalsFromTheModel(t *testing.T) {
	secret := `{"error":"invalid_client","error_description":"client secret GOCSPX-abc123 is wrong"}`
	refusal := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 401}, Body: []byte(secret), ErrorCode: "invalid_client"}
	busy := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 503}, Body: []byte(secret)}
	apiURL := "https://10.0.0.7:8443/gmail/v1/users/me/profile?alt=json"
	wrap := func(err error) error {
		return &url.Error{Op: "Get", URL: apiURL, Err: fmt.Errorf("google: refresh token: %w", err)}
	}
	for _, tc := range []struct {
		name string
		err  error
		code string // "" = passed through for the executor
	}{
		{"refused refresh", wrap(refusal), tools.CodeNotConnected},
		{"token endpoint down", wrap(busy), tools.CodeUnavailable},
		{"unreachable", &url.Error{Op: "Get", URL: apiURL, Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, tools.CodeUnavailable},
		{"timeout", &url.Error{Op: "Get", URL: apiURL, Err: context.DeadlineExceeded}, ""},
		{"store", errors.New("google: load token: database is locked"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := google.MapError(tc.err, "the mailbox")
			var te *tools.Error
			if !errors.As(got, &te) {
				if tc.code != "" || got != tc.err {
					t.Fatalf("MapError = %v, want %s", got, tc.code)
				}
				return
			}
			if te.Code != tc.code {
				t.Fatalf("code = %s, want %s", te.Code, tc.code)
			}
			if js := te.JSON(); strings.Contains(js, "10.0.0.7") || strings.Contains(js, "GOCSPX") || strings.Contains(js, "invalid_client") {
				t.Fatalf("the model would see internals: %s", js)
			}
		})
	}
}
