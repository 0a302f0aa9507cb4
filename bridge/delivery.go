package bridge

import (
	"log/slog"
	"net/http"
	"time"
)

// Delivery is what every channel takes from the process it runs in, the
// same for each: cmd builds it once per channel. A channel's Config
// embeds it; the channel passes it to its pipeline with Pipeline.
type Delivery struct {
	// ShutdownGrace is how long running turns may finish after a stop
	// (delivery.shutdown_grace); default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// MaxStarts is how often the process may end under a message's turn
	// before it is set aside (delivery.max_attempts; see
	// PipelineConfig.MaxStarts); default 3.
	MaxStarts int
	// Gate lets a turn run alone in the process: one for all the
	// process's channels. Nil gives each pipeline its own.
	Gate *Gate
	// Journal records each part the platform took before the inbox
	// does; optional.
	Journal Journal
	// Exclusive keeps a duty only one process may perform (polling, a
	// Socket Mode connection) to one process of those sharing the
	// database; nil runs it at once.
	Exclusive Exclusive
	// Claim keeps each chat's messages to one process at a time among
	// those sharing the database (see PipelineConfig.Claim); optional.
	Claim Claim
	// Files keeps the files people send, in the chat's workspace; nil
	// tells the model they are not kept.
	Files FileSaver
	// Voice hears voice notes and speaks answers; nil when voice notes
	// are not set up.
	Voice Voice
	// HTTPClient makes the channel's requests; default a new client.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Observer is told about turns, sends and retried API calls, for
	// metrics; optional.
	Observer Observer
}

// Fill gives what the process left unset its default: the default
// logger, an observer that records nothing, and client (when not nil)
// as the HTTP client. A channel's New calls it on its Config's Delivery.
func (d *Delivery) Fill(client *http.Client) {
	if d.HTTPClient == nil {
		d.HTTPClient = client
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Observer == nil {
		d.Observer = NopObserver{}
	}
}

// Pipeline is pc with the shared parts of d filled in.
func (d Delivery) Pipeline(pc PipelineConfig) PipelineConfig {
	pc.ShutdownGrace, pc.MaxStarts, pc.Journal, pc.Gate = d.ShutdownGrace, d.MaxStarts, d.Journal, d.Gate
	pc.Claim, pc.Voice, pc.Logger, pc.Observer = d.Claim, d.Voice, d.Logger, d.Observer
	return pc
}
