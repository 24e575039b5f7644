package chaos

import (
	"sync"
	"time"
)

// Mark is one fault the harness injected, stamped as it did: the report's
// timeline draws each at its moment.
type Mark struct {
	At   time.Time `json:"at"`
	Node string    `json:"node,omitempty"` // "" for the whole cluster (a heal)
	What string    `json:"what"`           // kill, pause, resume, terminate, start, partition, heal
}

// marks is a cluster's log of injected faults. Safe for concurrent use.
type marks struct {
	mu   sync.Mutex
	list []Mark
}

func (m *marks) add(node, what string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.list = append(m.list, Mark{At: time.Now(), Node: node, What: what})
	m.mu.Unlock()
}

// Marks are the faults injected into the cluster at or after since, in
// the order they were.
func (c *Cluster) Marks(since time.Time) []Mark {
	c.marks.mu.Lock()
	defer c.marks.mu.Unlock()
	var out []Mark
	for _, m := range c.marks.list {
		if !m.At.Before(since) {
			out = append(out, m)
		}
	}
	return out
}
