package core_test

import (
	"slices"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// dev is the live device of that name (the zero Device if none).
func dev(ds *core.Devices, name string) core.Device {
	d, _ := ds.Get(name)
	return d
}

// Devices behave as the map they replace: set replaces, delete forgets,
// All yields each once even while the loop deletes, and the last delete
// leaves an empty set.
func TestDevicesAsAMap(t *testing.T) {
	var ds core.Devices
	t0 := time.Unix(100, 0)
	for i, name := range []string{"phone", "laptop", "tablet"} {
		ds.Set(name, core.Device{Holder: &messages.Holder{Epoch: uint64(i + 1)}, Since: t0})
	}
	ds.Set("laptop", core.Device{Holder: &messages.Holder{Epoch: 9}, Since: t0.Add(time.Second)})
	if ds.Len() != 3 || dev(&ds, "laptop").GetEpoch() != 9 || !dev(&ds, "laptop").Since.Equal(t0.Add(time.Second)) {
		t.Fatalf("after replacing the laptop: len %d, laptop %+v", ds.Len(), dev(&ds, "laptop"))
	}
	if _, ok := ds.Get("watch"); ok || ds.Has("watch") {
		t.Fatal("a device never set is live")
	}
	var seen []string
	for name := range ds.All() {
		seen = append(seen, name)
		ds.Delete(name)
	}
	if !slices.Equal(seen, []string{"phone", "laptop", "tablet"}) || ds.Len() != 0 || ds.Has("phone") {
		t.Fatalf("deleting while ranging: saw %v, %d left", seen, ds.Len())
	}
	ds.Delete("phone") // not there: nothing happens
	ds.Set("phone", core.Device{Holder: &messages.Holder{Epoch: 2}})
	if ds.Len() != 1 || dev(&ds, "phone").GetEpoch() != 2 {
		t.Fatalf("set after emptying: len %d", ds.Len())
	}
}
