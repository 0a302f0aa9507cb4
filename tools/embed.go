package tools

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sort"
)

// Embedder turns texts into vectors of meaning (an OpenAI-compatible
// /embeddings). Memory, history search and find_tools use one when
// embeddings are on; a nil Embedder means off, and search is by words.
type Embedder interface {
	// Embed returns one vector per text, in order, and the model that
	// made them: vectors of two models are never compared, so a caller
	// keeps the model beside each vector. The person and chat the
	// request serves are the context's Caller, charged for it.
	Embed(ctx context.Context, texts []string) (Vectors, error)
}

// Vectors are what an Embedder answered.
type Vectors struct {
	Model   string
	Vectors [][]float32
}

// Meaning says how meaning took part in a search.
type Meaning string

// How meaning took part: not at all, as embeddings are off; ranked with
// the words; or not, as the provider could not embed the query (the
// search ran by words only, and says so).
const (
	MeaningOff         Meaning = ""
	MeaningUsed        Meaning = "used"
	MeaningUnavailable Meaning = "unavailable"
)

// ErrEmbedding marks an Embedder's failure (the provider down, a bad
// answer): a search falls back to words on it.
var ErrEmbedding = errors.New("embeddings")

// ErrEmbeddingRefused marks, with ErrEmbedding, a failure that is the
// texts' own: every provider refused the input itself (HTTP 400, 413 or
// 422), where another text would have been embedded. A row refused so
// is skipped, not taken for the provider being down.
var ErrEmbeddingRefused = errors.New("the embeddings provider refused the text")

// EncodeVector is v as a compact blob: float32s, little-endian.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// DecodeVector reads a blob EncodeVector wrote into dst (grown as
// needed) and returns it.
func DecodeVector(dst []float32, b []byte) []float32 {
	n := len(b) / 4
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dst
}

// Normalize scales v to length 1 in place (a zero vector stays zero),
// so a cosine is a dot product.
func Normalize(v []float32) []float32 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	if s == 0 {
		return v
	}
	n := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= n
	}
	return v
}

// Dot is the dot product of a and b, 0 when their lengths differ (two
// models' vectors, which are never compared).
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		return 0
	}
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// RRFK is reciprocal rank fusion's constant: a rank r counts 1/(RRFK+r).
const RRFK = 60

// Fuse merges rankings of ids (each best first) by reciprocal rank
// fusion: an id's score is the sum over the rankings it is in of
// 1/(RRFK+rank). Ties keep the first ranking's order. Linear in the
// rankings' total length (and a sort of the result).
func Fuse(rankings ...[]int64) []int64 {
	score := map[int64]float64{}
	first := map[int64]int{}
	var order []int64
	for _, r := range rankings {
		for i, id := range r {
			if _, ok := score[id]; !ok {
				first[id] = len(order)
				order = append(order, id)
			}
			score[id] += 1 / float64(RRFK+i+1)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if score[order[i]] != score[order[j]] {
			return score[order[i]] > score[order[j]]
		}
		return first[order[i]] < first[order[j]]
	})
	return order
}
