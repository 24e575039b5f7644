package core

import (
	"iter"
	"slices"

	"github.com/presence-im/presence/messages"
)

// Devices are a view's live devices by name. A user has one device or a
// few (at most Limits.Devices), so they are a slice searched in order:
// a Go map allocates a group of eight slots at its first entry, several
// times the one entry a view with one device holds here (BENCHMARKS.md,
// "RSS and heap per device"). The zero value is empty; not safe for
// concurrent use (a view is its actor's).
type Devices struct{ s []namedDevice }

type namedDevice struct {
	name string
	Device
}

// Get is the device of that name, if it is live.
func (ds *Devices) Get(name string) (Device, bool) {
	if i := ds.index(name); i >= 0 {
		return ds.s[i].Device, true
	}
	return Device{}, false
}

// Has says whether the device of that name is live.
func (ds *Devices) Has(name string) bool { return ds.index(name) >= 0 }

// Set records or replaces the device of that name.
func (ds *Devices) Set(name string, d Device) {
	if i := ds.index(name); i >= 0 {
		ds.s[i].Device = d
		return
	}
	ds.s = append(ds.s, namedDevice{name, d})
}

// Delete forgets the device of that name; the last one gone lets the
// slice go.
func (ds *Devices) Delete(name string) {
	if i := ds.index(name); i >= 0 {
		ds.s = slices.Delete(ds.s, i, i+1)
	}
	if len(ds.s) == 0 {
		ds.s = nil
	}
}

// Holders are the live devices' holders, ordered by deliverability
// (ByDeliverability); nil when none is live.
func (ds *Devices) Holders() []*messages.Holder {
	if len(ds.s) == 0 {
		return nil
	}
	sorted := slices.Clone(ds.s)
	slices.SortFunc(sorted, func(a, b namedDevice) int { return ByDeliverability(a.name, a.Holder, b.name, b.Holder) })
	out := make([]*messages.Holder, len(sorted))
	for i := range sorted {
		out[i] = sorted[i].Holder
	}
	return out
}

// Sorted yields each live device with its name, ordered by
// deliverability (ByDeliverability).
func (ds *Devices) Sorted() iter.Seq2[string, Device] {
	return func(yield func(string, Device) bool) {
		sorted := slices.Clone(ds.s)
		slices.SortFunc(sorted, func(a, b namedDevice) int { return ByDeliverability(a.name, a.Holder, b.name, b.Holder) })
		for _, d := range sorted {
			if !yield(d.name, d.Device) {
				return
			}
		}
	}
}

// Len is the number of live devices.
func (ds *Devices) Len() int { return len(ds.s) }

// All yields each live device with its name, in the order they came up.
// The view may change while it runs (a device yielded may be deleted).
func (ds *Devices) All() iter.Seq2[string, Device] {
	return func(yield func(string, Device) bool) {
		for _, d := range slices.Clone(ds.s) {
			if !yield(d.name, d.Device) {
				return
			}
		}
	}
}

func (ds *Devices) index(name string) int {
	for i := range ds.s {
		if ds.s[i].name == name {
			return i
		}
	}
	return -1
}
