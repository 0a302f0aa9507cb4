package chat

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A picture a tool returns is budgeted by its size, not at a flat cost.
func TestImageCostScalesWithSize(t *testing.T) {
	for _, tc := range []struct {
		w, h, want int
	}{
		{20, 20, 85 + 170},       // one tile
		{1024, 1024, 85 + 170*4}, // scaled to 768×768: 2×2 tiles
		{2048, 4096, 85 + 170*6}, // 1024×2048, then 768×1536: 2×3 tiles
		{4000, 100, 85 + 170*4},  // 2048×51: 4×1 tiles
		{512, 512, 85 + 170},     // exactly one tile
		{513, 512, 85 + 170*2},   // a pixel more: two
		{100, 3000, 85 + 170*4},  // 68×2048: 1×4 tiles
	} {
		if got := imageCost(pngOf(t, tc.w, tc.h)); got != tc.want {
			t.Errorf("%d×%d: %d tokens, want %d", tc.w, tc.h, got, tc.want)
		}
	}
	if got := imageCost([]byte("not a picture")); got != imageTokens {
		t.Errorf("unreadable: %d", got)
	}
}
