package google_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	gdrive "google.golang.org/api/drive/v3"

	"loadout/google"
	"loadout/google/googletest"
	"loadout/tools"
)

// The shared call helper: Do builds the service as the caller, retries a
// temporary error and maps the final one; CallOnce and DoOnce do not
// repeat a request after a server error; a group's own mapping comes
// first; a person without an account gets not_connected untouched.
func TestAPIHelpers(t *testing.T) {
	f := googletest.NewAPI(t)
	var n atomic.Int32
	f.Handle("GET /drive/v3/files/f1", func(googletest.Request) (int, string) {
		if n.Add(1) == 1 {
			return 503, `{"error":{"code":503,"message":"backend error"}}`
		}
		return 200, `{"id":"f1","name":"Plan"}`
	})
	f.On("GET /drive/v3/files/gone", 404, `{"error":{"code":404,"message":"File not found"}}`)
	f.On("DELETE /drive/v3/files/f2", 500, `{"error":{"code":500,"message":"backend error"}}`)
	api := google.API[gdrive.Service]{
		Client:  &googletest.Client{Endpoint: f.URL, Connected: map[string]bool{"telegram:42": true}},
		Service: google.Service{Path: "drive/v3/", Scopes: []string{gdrive.DriveScope}},
		New:     gdrive.NewService,
		Backoff: googletest.Backoff,
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{UserKey: "telegram:42"})
	get := func(id string) (*gdrive.File, error) {
		return google.Do(ctx, api, "the file '"+id+"'", func(s *gdrive.Service) (*gdrive.File, error) {
			return s.Files.Get(id).Context(ctx).Do()
		})
	}
	if file, err := get("f1"); err != nil || file.Name != "Plan" || n.Load() != 2 {
		t.Fatalf("Do = %+v, %v after %d tries", file, err, n.Load())
	}
	var te *tools.Error
	if _, err := get("gone"); !errors.As(err, &te) || te.Code != tools.CodeNotFound || !strings.Contains(te.Message, "the file 'gone'") {
		t.Fatalf("not found = %v", err)
	}
	svc, err := api.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = api.CallOnce(ctx, "the file 'f2'", func() error { return svc.Files.Delete("f2").Context(ctx).Do() })
	if !errors.As(err, &te) || f.Count("DELETE /drive/v3/files/f2") != 1 {
		t.Fatalf("CallOnce = %v after %d tries", err, f.Count("DELETE /drive/v3/files/f2"))
	}
	_, err = google.DoOnce(ctx, api, "the file 'f2'", func(s *gdrive.Service) (struct{}, error) {
		return struct{}{}, s.Files.Delete("f2").Context(ctx).Do()
	})
	if !errors.As(err, &te) || f.Count("DELETE /drive/v3/files/f2") != 2 {
		t.Fatalf("DoOnce = %v after %d tries in all", err, f.Count("DELETE /drive/v3/files/f2"))
	}
	own := api
	own.Map = func(err error, what string) error { return &tools.Error{Code: "mine", Message: what} }
	if _, err := google.Do(ctx, own, "x", func(s *gdrive.Service) (*gdrive.File, error) { return s.Files.Get("gone").Context(ctx).Do() }); !errors.As(err, &te) || te.Code != "mine" {
		t.Fatalf("group mapping = %v", err)
	}
	stranger := tools.WithCaller(context.Background(), tools.Caller{UserKey: "telegram:7"})
	if _, err := google.Do(stranger, api, "x", func(s *gdrive.Service) (*gdrive.File, error) { return nil, nil }); !errors.As(err, &te) || te.Code != tools.CodeNotConnected {
		t.Fatalf("not connected = %v", err)
	}
	if e := google.Invalid("file_id", "is empty"); e.Code != tools.CodeInvalidArgument || e.Message != "parameter 'file_id' is empty" {
		t.Fatalf("Invalid = %+v", e)
	}
	if google.Required("to", " \n") == nil || google.Required("to", "a") != nil {
		t.Fatal("Required")
	}
}
