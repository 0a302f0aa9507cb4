package google_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
