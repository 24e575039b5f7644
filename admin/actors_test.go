package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/presence-im/presence/actors"
)

// GET /api/actors pages a node's actors with their state; a bad kind,
// limit or query is refused with a 400 naming the rule, an unknown node
// with a 404, and without the token nothing is answered.
func TestActorsPage(t *testing.T) {
	f := newFixture(t, "")
	for i := range 3 {
		c, err := f.node.Gateway().Open(context.Background(), actors.OpenRequest{User: fmt.Sprintf("u%d", i), Device: "phone", Attempt: 1, ConnID: fmt.Sprintf("c%d", i), Socket: nopSocket{}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Closed()
	}
	var page ActorsPage
	code, body := f.do(t, "GET", "/api/actors?kind=lease&limit=2", "")
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("leases = %d %s (%v)", code, body, err)
	}
	if page.Node != "n1" || page.Total != 3 || len(page.Actors) != 2 || page.Actors[0].Key != "u0/phone" || page.Next == "" ||
		page.Actors[0].Lease == nil || page.Actors[0].Lease.HolderConn != "c0" || page.Actors[0].Lease.ExpiresInMs <= 0 {
		t.Fatalf("first page of leases %s: want u0/phone held by c0 with its expiry, u1/phone, a cursor, total 3", body)
	}
	code, body = f.do(t, "GET", "/api/actors?node=n1&kind=lease&limit=2&after="+strings.ReplaceAll(page.Next, " ", "%20"), "")
	if code != 200 || !strings.Contains(body, `"key":"u2/phone"`) || strings.Contains(body, `"next"`) {
		t.Fatalf("second page = %d %s, want u2/phone and no cursor", code, body)
	}
	if code, body = f.do(t, "GET", "/api/actors?kind=connection&q=u1", ""); code != 200 || !strings.Contains(body, `"conn_id":"c1"`) || strings.Contains(body, `"c0"`) {
		t.Fatalf("connections of u1 = %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/api/actors":                            400, // no kind
		"/api/actors?kind=grain":                 400,
		"/api/actors?kind=view&limit=0":          400,
		"/api/actors?kind=view&limit=201":        400,
		"/api/actors?kind=view&limit=x":          400,
		"/api/actors?kind=view&q=" + long(600):   400,
		"/api/actors?kind=view&node=n9":          404,
		"/api/actors?kind=view&node=n1&limit=10": 200,
	} {
		if code, body := f.do(t, "GET", path, ""); code != want {
			t.Errorf("%s = %d %s, want %d", path, code, body, want)
		}
	}
	locked := newFixture(t, "s3cret")
	if code, _ := locked.do(t, "GET", "/api/actors?kind=lease", ""); code != 401 {
		t.Fatalf("without the token = %d, want 401", code)
	}
}

func long(n int) string { return strings.Repeat("a", n) }
