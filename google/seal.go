package google

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyHelp tells a person how to make a token key.
const KeyHelp = "make one with `openssl rand -base64 32` and put it in google.token_key or the environment variable LOADOUT_TOKEN_KEY"

// ErrNoKey is returned when Google access is configured without a token
// key: tokens are never stored unencrypted.
var ErrNoKey = errors.New("google: no token key: Google tokens are stored encrypted; " + KeyHelp)

// ParseKey decodes a token key: 32 random bytes written in standard or
// URL-safe base64 (padded or not) or in hex. An empty string gives ErrNoKey.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, ErrNoKey
	}
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if k, err := dec(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, fmt.Errorf("google: the token key must be 32 random bytes in base64 (or 64 hex digits); %s", KeyHelp)
}

// sealer encrypts tokens with AES-256-GCM. The user key is the additional
// data, so a sealed token copied to another person's row does not open.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (sealer, error) {
	if len(key) != 32 {
		return sealer{}, fmt.Errorf("google: token key has %d bytes, want 32; %s", len(key), KeyHelp)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, fmt.Errorf("google: token key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealer{}, fmt.Errorf("google: token key: %w", err)
	}
	return sealer{aead}, nil
}

// seal returns nonce || ciphertext.
func (s sealer) seal(userKey string, plain []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("google: nonce: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plain, []byte(userKey)), nil
}

func (s sealer) open(userKey string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("google: stored token is truncated")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(userKey))
	if err != nil {
		return nil, errors.New("google: stored token does not decrypt with this token key (was the key changed?)")
	}
	return plain, nil
}
