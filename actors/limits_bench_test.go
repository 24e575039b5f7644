package actors

import (
	"context"
	"fmt"
	"testing"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store"
)

// BenchmarkOpen is one handshake's trip through the actors, a new device
// of a new user each time: the device admission (the user's view, against
// --max-devices), the lease and the connection actor. ns/op is per
// handshake, one node, no network.
func BenchmarkOpen(b *testing.B) {
	b.ReportAllocs()
	n, err := Start(Deps{NodeID: "n1", Timing: config.Seed(), Seed: 1, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Stop()
	b.ResetTimer()
	for i := range b.N {
		user := fmt.Sprintf("u%08d", i)
		if _, err := n.Gateway().Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: nopSocket{}}); err != nil {
			b.Fatal(err)
		}
	}
}
