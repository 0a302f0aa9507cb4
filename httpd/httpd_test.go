package httpd

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every request's body is held to Limits.Body, except on a route that
// asks for more with AllowBody, which is held to what it asked.
func TestAllowBodyRaisesTheCapForOneRoute(t *testing.T) {
	read := func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /small", read)
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		AllowBody(w, r, 3<<20, 0)
		read(w, r)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config = Server(mux, DefaultLimits, slog.New(slog.DiscardHandler))
	srv.Start()
	defer srv.Close()
	for _, c := range []struct {
		path string
		size int
		want int
	}{
		{"/small", 1 << 19, 200}, {"/small", 2 << 20, 413},
		{"/upload", 2 << 20, 200}, {"/upload", 4 << 20, 413},
	} {
		resp, err := http.Post(srv.URL+c.path, "application/octet-stream", bytes.NewReader(make([]byte, c.size)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s with %d bytes: %d, want %d", c.path, c.size, resp.StatusCode, c.want)
		}
	}
}
