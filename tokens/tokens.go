// Package tokens counts tokens with the o200k_base encoding (the GPT-4o
// family's), using tiktoken-go with its vocabulary embedded, so counting
// works offline.
package tokens

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Counter counts tokens. It is safe for concurrent use.
type Counter struct {
	enc *tiktoken.Tiktoken
}

var setLoader sync.Once

// New loads the o200k_base encoding (about half a second; do it once).
func New() (*Counter, error) {
	// tiktoken-go keeps its loader in a package variable; set it once to
	// the offline loader so no download is ever attempted.
	setLoader.Do(func() { tiktoken.SetBpeLoader(loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(tiktoken.MODEL_O200K_BASE)
	if err != nil {
		return nil, fmt.Errorf("tokens: load o200k_base: %w", err)
	}
	return &Counter{enc: enc}, nil
}

// Count returns the number of tokens in s.
func (c *Counter) Count(s string) int {
	if s == "" {
		return 0
	}
	return len(c.enc.Encode(s, nil, nil))
}
