package bench

import (
	"strings"
	"testing"
)

// A node's counters are summed per key: a series named exactly, or every
// series of a family named without labels; comments and other families
// count nothing.
func TestSumSeries(t *testing.T) {
	page := `# HELP presence_remote_bytes_total Bytes.
# TYPE presence_remote_bytes_total counter
presence_remote_bytes_total{dir="in"} 10
presence_remote_bytes_total{dir="out"} 32
presence_remote_connections{side="client"} 2
presence_remote_connections{side="server"} 3
memberlist_udp_sent 100
memberlist_tcp_sent 7
memberlist_udp_sent_other 1000
`
	got := sumSeries(strings.NewReader(page), scaleCounters)
	want := map[string]float64{"gossip_out": 107, "remote_out": 32, "remote_in": 10, "conns": 5}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if got["gossip_in"] != 0 || got["renewals"] != 0 {
		t.Errorf("series absent from the page summed to %v, %v", got["gossip_in"], got["renewals"])
	}
}
