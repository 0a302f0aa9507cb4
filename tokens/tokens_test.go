package tokens

import "testing"

func TestCountUsesO200k(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// Reference counts from OpenAI's tokenizer for o200k_base.
	cases := map[string]int{"": 0, "hello world": 2, "Hello, world!": 4}
	for s, want := range cases {
		if got := c.Count(s); got != want {
			t.Errorf("Count(%q) = %d, want %d", s, got, want)
		}
	}
	// A character estimate would give 25 for this; o200k gives far fewer.
	if got := c.Count("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); got >= 25 {
		t.Errorf("100 a's counted as %d tokens; not a real tokenizer", got)
	}
}
