package pdf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"loadout/tools"
	"loadout/worker"
)

// Job is the name of the PDF reader's worker job: main, and the
// TestMain of every test binary that reads PDFs, serve it (Work).
const Job = "pdf"

// What a job asks of the worker.
const (
	opInfo = "info"
	opText = "text"
)

// job is a request to the worker; the PDF follows it on the next line.
type job struct {
	Op       string `json:"op"`
	Name     string `json:"name"`
	MaxChars int    `json:"max_chars,omitempty"`
	In       textIn `json:"in"`
}

// answer is the worker's reply.
type answer struct {
	Info  *infoOut     `json:"info,omitempty"`
	Text  *textOut     `json:"text,omitempty"`
	Error *tools.Error `json:"error,omitempty"`
}

// parse has a worker read data as j asks, under l.
func parse(ctx context.Context, l Limits, j job, data []byte) (answer, error) {
	head, err := json.Marshal(j)
	if err != nil {
		return answer{}, err
	}
	req := append(append(head, '\n'), data...)
	out, err := worker.Run(ctx, Job, req, l.worker())
	for _, why := range []error{worker.ErrMemory, worker.ErrTime, worker.ErrCrash} {
		if errors.Is(err, why) {
			return answer{}, &tools.Error{Code: tools.CodeInvalidArgument,
				Message:    fmt.Sprintf("This PDF could not be read: %s.", why),
				Suggestion: "Tell the person this PDF could not be read; another copy (printed to PDF again) may work."}
		}
	}
	if err != nil {
		return answer{}, err
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		return answer{}, fmt.Errorf("pdf worker: %w", err)
	}
	switch {
	case a.Error != nil:
		return answer{}, a.Error
	case j.Op == opInfo && a.Info == nil, j.Op == opText && a.Text == nil:
		return answer{}, errors.New("pdf worker: an empty answer")
	}
	return a, nil
}

// Work is the worker job: it reads the request's PDF in this process,
// the worker, and answers with what was asked or the reader's error for
// the model.
func Work(req []byte) ([]byte, error) {
	head, data, ok := bytes.Cut(req, []byte{'\n'})
	var j job
	if !ok || json.Unmarshal(head, &j) != nil {
		return nil, errors.New("the request does not parse")
	}
	var a answer
	var err error
	switch j.Op {
	case opInfo:
		var info infoOut
		info, err = infoOf(data, j.Name)
		a.Info = &info
	case opText:
		var text textOut
		text, err = textOf(data, j.Name, j.MaxChars, j.In)
		a.Text = &text
	default:
		return nil, fmt.Errorf("no operation %q", j.Op)
	}
	if err != nil {
		te, ok := err.(*tools.Error)
		if !ok {
			te = damaged(j.Name)
		}
		a = answer{Error: te}
	}
	return json.Marshal(a)
}
