package openai

import "fmt"

// Line is the provider's state in a line, for /readyz and the web
// console: its name, host, and, when it is skipped, until when and why.
// Never a key or a URL.
func (p ProviderStatus) Line() string {
	line := fmt.Sprintf("model provider %s (%s): %s", p.Name, p.Host, p.State)
	switch {
	case p.State == Open:
		line += fmt.Sprintf(", skipped until %s after %s", p.Until.UTC().Format("15:04:05 UTC"), p.Reason)
	case p.Reason != "":
		line += ", last failure " + p.Reason
	}
	return line
}

// Status is the /status line of the providers: which one answered last
// in this process, with which model, and which are skipped.
func (f *Failover) Status() string {
	line := "Model provider: none has answered yet"
	if p, model, ok := f.Last(); ok {
		line = fmt.Sprintf("Model provider: the last answer came from %s (%s), model %s", p.Name, p.Host, model)
	}
	for _, p := range f.Providers() {
		if p.State == Open {
			line += fmt.Sprintf("; %s (%s) is skipped until %s after %s", p.Name, p.Host, p.Until.UTC().Format("15:04 UTC"), p.Reason)
		}
	}
	return line
}
