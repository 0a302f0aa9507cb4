package store

import (
	"context"
	"sync"

	"loadout/tools"
)

// vectorKey names one owner's vectors of one kind and model: what a
// search scans.
type vectorKey struct{ kind, model, owner string }

// vectorSet is an owner's vectors, decoded into one slice, with the
// stamp of the rows they were read from.
type vectorSet struct {
	stamp [4]int64
	ids   []int64
	vecs  []float32
	dims  int
	used  uint64
}

func (s *vectorSet) bytes() int64 { return int64(len(s.vecs))*4 + int64(len(s.ids))*8 }

// vectorCache keeps vector sets between searches, at most max bytes of
// them, the least recently used dropped first. A set is used only while
// the store's stamp of its rows (vectorStamp) is unchanged, so a write
// by this process or another replica is seen at the next search.
type vectorCache struct {
	mu   sync.Mutex
	max  int64
	used int64
	tick uint64
	sets map[vectorKey]*vectorSet
}

// vectorsOf is key's vectors: from the cache when the rows' stamp has
// not changed, else read from the store (and kept, within the bound).
func (d *DB) vectorsOf(ctx context.Context, key vectorKey) (*vectorSet, error) {
	var stamp [4]int64
	// From the index alone (idx_embeddings_scan holds the row ids).
	if err := d.db.WithContext(ctx).Raw(`SELECT count(*), COALESCE(SUM(row_id), 0), COALESCE(SUM(row_id % 65521 * (row_id % 65519)), 0), COALESCE(MAX(row_id), 0)
		FROM embeddings WHERE kind = ? AND model = ? AND owner = ?`, key.kind, key.model, key.owner).Row().Scan(&stamp[0], &stamp[1], &stamp[2], &stamp[3]); err != nil {
		return nil, kind(err)
	}
	c := &d.meaning.cache
	c.mu.Lock()
	if s, ok := c.sets[key]; ok && s.stamp == stamp {
		c.tick++
		s.used = c.tick
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	rows, err := d.db.WithContext(ctx).Raw(`SELECT row_id, vector FROM embeddings WHERE kind = ? AND model = ? AND owner = ?`, key.kind, key.model, key.owner).Rows()
	if err != nil {
		return nil, kind(err)
	}
	defer rows.Close()
	s := &vectorSet{stamp: stamp}
	var blob []byte
	var buf []float32
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, kind(err)
		}
		buf = tools.DecodeVector(buf, blob)
		if s.dims == 0 {
			s.dims = len(buf)
			s.ids, s.vecs = make([]int64, 0, stamp[0]), make([]float32, 0, int(stamp[0])*s.dims)
		}
		if len(buf) != s.dims || s.dims == 0 {
			continue // not of this model's length: never compared
		}
		s.ids = append(s.ids, id)
		s.vecs = append(s.vecs, buf...)
	}
	if err := rows.Err(); err != nil {
		return nil, kind(err)
	}
	c.keep(key, s)
	return s, nil
}

// keep puts s in the cache, dropping the least recently used sets to
// stay within max; a set larger than max is not kept.
func (c *vectorCache) keep(key vectorKey, s *vectorSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.sets[key]; ok {
		c.used -= old.bytes()
		delete(c.sets, key)
	}
	if s.bytes() > c.max {
		return
	}
	for c.used+s.bytes() > c.max {
		var oldest vectorKey
		var at uint64
		first := true
		for k, v := range c.sets {
			if first || v.used < at {
				oldest, at, first = k, v.used, false
			}
		}
		c.used -= c.sets[oldest].bytes()
		delete(c.sets, oldest)
	}
	c.tick++
	s.used = c.tick
	c.sets[key] = s
	c.used += s.bytes()
}
