package browser

import (
	"context"
	"sync"
	"time"

	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// navWatch follows a tab's navigations and crashes from its events, so
// an action knows whether it started a navigation to wait for, and a
// crash cuts the action short.
type navWatch struct {
	tab     context.Context
	mu      sync.Mutex
	req     int  // navigations the page asked for so far
	gen     int  // loads started so far
	loading int  // frames loading now
	crashed bool // the renderer crashed
	// changed is closed and replaced at every event.
	changed chan struct{}
	// abort, when set, cuts the running action short (a crash).
	abort context.CancelFunc
}

// watch starts following tab's events.
func watch(tab context.Context) *navWatch {
	w := &navWatch{tab: tab, changed: make(chan struct{})}
	chromedp.Listen(tab, w.event)
	return w
}

func (w *navWatch) event(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.(type) {
	case *page.EventFrameRequestedNavigation:
		w.req++
	case *page.EventFrameStartedLoading:
		w.gen++
		w.loading++
	case *page.EventFrameStoppedLoading:
		w.loading = max(0, w.loading-1)
	case *inspector.EventTargetCrashed:
		w.crashed = true
		if w.abort != nil {
			w.abort()
		}
	default:
		return
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// arm sets what a crash cancels (nil: nothing).
func (w *navWatch) arm(abort context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abort = abort
	if w.crashed && abort != nil {
		abort()
	}
}

func (w *navWatch) hasCrashed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crashed
}

// mark is where the tab's navigations stand, to ask since about.
type mark struct{ req, gen int }

// generation is a mark to ask since about.
func (w *navWatch) generation() mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return mark{w.req, w.gen}
}

// since reports whether a navigation was asked for or started after m.
func (w *navWatch) since(m mark) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.req != m.req || w.gen != m.gen
}

// settle waits, after an action taken at m, for the navigation it
// started (if any) to finish loading. A navigation the page asks for as
// the action runs is seen before the action's answer; one that has not
// started loading 3 s after it was asked for (the page cancelled it) is
// not waited for; one asked for from a timer gets 250 ms to show.
func (w *navWatch) settle(ctx context.Context, m mark) error {
	grace := time.NewTimer(250 * time.Millisecond)
	defer grace.Stop()
	var start <-chan time.Time
	for {
		w.mu.Lock()
		asked, started, loading, ch := w.req != m.req, w.gen != m.gen, w.loading > 0, w.changed
		w.mu.Unlock()
		if started && !loading {
			return nil
		}
		if asked && !started && start == nil {
			t := time.NewTimer(3 * time.Second)
			defer t.Stop()
			start = t.C
		}
		select {
		case <-ch:
		case <-grace.C:
			if !asked && !started {
				return nil
			}
		case <-start:
			if !started {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// loaded waits until no frame is loading.
func (w *navWatch) loaded(ctx context.Context) error {
	for {
		w.mu.Lock()
		loading, ch := w.loading > 0, w.changed
		w.mu.Unlock()
		if !loading {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// navigate opens url and waits for it to load.
func (w *navWatch) navigate(ctx context.Context, url string) error {
	return chromedp.Do(ctx, chromedp.Navigate(url))
}
