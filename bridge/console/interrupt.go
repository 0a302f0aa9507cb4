package console

import (
	"context"
	"os"
	"os/signal"
	"sync"
)

// interrupter routes Ctrl-C (SIGINT): to the handler set, while one is
// (the console during a message), else it ends the command, as SIGTERM
// does.
type interrupter struct {
	mu      sync.Mutex
	handler func() bool
}

type interrupterKey struct{}

// WithInterrupts returns ctx ended by SIGINT unless a handler set with
// OnInterrupt takes it, and a function that stops listening. A command
// calls it once, at its start.
func WithInterrupts(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	in := &interrupter{}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	go func() {
		for {
			select {
			case <-ch:
				in.mu.Lock()
				h := in.handler
				in.mu.Unlock()
				if h == nil || !h() {
					cancel()
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return context.WithValue(ctx, interrupterKey{}, in), func() { signal.Stop(ch); cancel() }
}

// OnInterrupt hands Ctrl-C to h until the returned function is called; h
// reports whether it took the interrupt (Console.Interrupt does, while a
// message is under way). Without WithInterrupts it does nothing.
func OnInterrupt(ctx context.Context, h func() bool) func() {
	in, ok := ctx.Value(interrupterKey{}).(*interrupter)
	if !ok {
		return func() {}
	}
	in.mu.Lock()
	in.handler = h
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		in.handler = nil
		in.mu.Unlock()
	}
}
