package logs

import (
	"bytes"
	"strings"
	"testing"
)

// Attributes given to With are redacted when a record is written, in
// their place before and inside groups.
func TestWithAttrsRedactedWhenWritten(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "info", "text", []string{"s3cret-value"}, nil)
	l := log.With("token", "s3cret-value", "chat", "c1").WithGroup("g").With("key", "sk-abcdefghijklmnopqrstu")
	l.Debug("not written")
	if buf.Len() != 0 {
		t.Fatalf("a debug record was written at info: %s", buf.String())
	}
	l.Info("hello", "x", "s3cret-value")
	got := buf.String()
	for _, want := range []string{"token=[REDACTED]", "chat=c1", "g.key=[REDACTED]", "g.x=[REDACTED]", "msg=hello"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %s", want, got)
		}
	}
	if strings.Contains(got, "s3cret") || strings.Contains(got, "sk-abc") {
		t.Errorf("a secret was written: %s", got)
	}
}
