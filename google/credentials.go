package google

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Credentials is the OAuth client from a client secret JSON file as
// downloaded from Google Cloud Console.
type Credentials struct {
	ClientID     string
	ClientSecret string
	AuthURL      string
	TokenURL     string
	// RedirectURLs are the registered redirect URIs ("web" clients).
	RedirectURLs []string
	// Installed is true for a desktop ("installed") client, which accepts
	// any loopback redirect.
	Installed bool
}

// ReadCredentials reads a client secret file; see ParseCredentials.
func ReadCredentials(path string) (Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("google: credentials file: %w", err)
	}
	c, err := ParseCredentials(b)
	if err != nil {
		return Credentials{}, fmt.Errorf("%w (%s)", err, path)
	}
	return c, nil
}

// ParseCredentials parses a client secret JSON of the "installed" or "web"
// shape.
func ParseCredentials(b []byte) (Credentials, error) {
	type client struct {
		ClientID     string   `json:"client_id"`
		ClientSecret string   `json:"client_secret"`
		AuthURI      string   `json:"auth_uri"`
		TokenURI     string   `json:"token_uri"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	var f struct {
		Installed *client `json:"installed"`
		Web       *client `json:"web"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return Credentials{}, fmt.Errorf("google: credentials file is not JSON: %w", err)
	}
	c, installed := f.Web, false
	if f.Installed != nil {
		c, installed = f.Installed, true
	}
	if c == nil {
		return Credentials{}, errors.New(`google: credentials file has neither an "installed" nor a "web" client; download the OAuth client JSON from Google Cloud Console`)
	}
	if c.ClientID == "" {
		return Credentials{}, errors.New("google: credentials file has no client_id")
	}
	return Credentials{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, AuthURL: c.AuthURI, TokenURL: c.TokenURI,
		RedirectURLs: c.RedirectURIs, Installed: installed,
	}, nil
}
