package main

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

// withInterrupts returns ctx ended by SIGINT unless a handler set with
// onInterrupt takes it, and a function that stops listening.
func withInterrupts(ctx context.Context) (context.Context, func()) {
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

// onInterrupt hands Ctrl-C to h until the returned function is called; h
// reports whether it took the interrupt. Without withInterrupts (a test
// calling run) it does nothing.
func onInterrupt(ctx context.Context, h func() bool) func() {
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
