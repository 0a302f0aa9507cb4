package bridge

import (
	"encoding/json"
	"fmt"
)

// JSONRoute keeps a channel's route, R, in the inbox as JSON: what a
// channel's ReadRoute returns, and how its other methods take the value
// back. Channel names the channel in errors.
type JSONRoute[R any] struct{ Channel string }

// Read decodes a route the inbox keeps (an Outlet's ReadRoute).
func (j JSONRoute[R]) Read(raw []byte) (any, error) {
	var r R
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: unreadable route: %w", j.Channel, err)
	}
	return r, nil
}

// Of is the route Read returned, as the channel's type.
func (j JSONRoute[R]) Of(route any) (R, error) {
	r, ok := route.(R)
	if !ok {
		return r, fmt.Errorf("%s: %T is not a route of the channel", j.Channel, route)
	}
	return r, nil
}

// Encode is r as the inbox keeps it. R must encode (plain fields do).
func (JSONRoute[R]) Encode(r R) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("bridge: a route of type %T does not encode: %v", r, err))
	}
	return b
}
