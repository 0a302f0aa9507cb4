package bridgetest

import (
	"context"
	"syscall"
	"time"

	"loadout/chat"
)

// Instant is a model that answers "ok" at once, in process, so a
// channel's benchmark measures the channel, the pipeline, the engine and
// the store, and nothing of a model's HTTP.
type Instant struct{}

// Complete answers "ok".
func (Instant) Complete(context.Context, chat.Request) (chat.Response, error) {
	return chat.Response{Text: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

// ProcessCPU is the processor time the process has used so far, user and
// system: a channel's benchmark reports its difference per message
// ("cpu-ms/msg"), the same way for every channel.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
