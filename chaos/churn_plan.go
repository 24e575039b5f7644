package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/sqlite"
)

// The churn scenario (docs/bounds.md, "Memory under churn"): devices of
// Options.Users distinct users connect in waves, subscribe to a few
// contacts each, stay a few seconds and leave, so that at most about
// Options.Online are connected at once; a few resident devices stay
// throughout. Every second the harness reads each node's /metrics; the
// checks are that live lease and view actors stay within what the devices
// connected in the last idle window can explain, and that after everyone
// left and idle passed, actors, heap and RSS are back to the baseline
// measured after a warm-up.

// Churn defaults: the distinct users, the devices connected at most at
// once, and the nodes' --idle.
const (
	ChurnUsers  = 100_000
	ChurnOnline = 1000
	ChurnIdle   = 4 * time.Second
	// ChurnStay is how long a churning device stays connected on average
	// (each draws from half to one and a half of it).
	ChurnStay = 6 * time.Second
	// ChurnContacts is how many contacts each device subscribes to.
	ChurnContacts = 4
	// ChurnWaves is how many waves the users arrive in by default; between
	// two, every churning device has left for longer than the idle window.
	ChurnWaves = 3
	// ChurnTolerance is the 10% the checks allow over what they expect.
	ChurnTolerance = 0.10
)

// churnSession is one device's visit: it dials at At (from the start of
// its wave) and stays for Stay; Resident ones stay to the end.
type churnSession struct {
	User     string
	Node     int
	Contacts []string
	Wave     int
	At, Stay time.Duration
	Resident bool

	mu       sync.Mutex
	start    time.Time // dialling began (its lease may be activating)
	up, down time.Time // hello received; close begun
	err      error     // why it never came up
	events   int       // presence events it received
	cut      int       // times the server closed it before it left
}

func (s *churnSession) times() (start, up, down time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start, s.up, s.down
}

// churnPlan is a churn run's schedule, drawn from Seed.
type churnPlan struct {
	Seed      uint64
	Users     int
	Online    int
	Stay      time.Duration
	Idle      time.Duration
	Waves     int
	Arrive    time.Duration // how long each wave's arrivals take
	residents []*churnSession
	warm      []*churnSession
	sessions  []*churnSession // the churning devices, by At
}

// newChurnPlan draws the schedule: Users/Waves users per wave
// arriving evenly over Arrive (so about Online are connected at once; a
// wave starts once the one before has left and been measured),
// contacts drawn among all users (most of them offline: their views exist
// only for the subscribers), residents subscribed to each other. The
// warm-up is a wave of users of their own (as many, arriving over as
// long, their contacts drawn among as many names: most of them never
// online, their views there only for the subscribers), so that the
// baseline after it holds what a node keeps from a wave's peak: its
// bounded caches filled (SQLite's page cache, 512 KiB per connection),
// proto.actor's process registry and the directory's maps at their
// buckets, heap spans pinned by a few survivors. What the checks then ask
// is that three more waves of users never seen leave nothing more. Until
// 2026-12-02 the warm-up was 2 x Stay and the window with contacts drawn
// among its own few thousand users: half a wave's views, a third of its
// users, and every node's RSS rose over the baseline after the first wave
// and stayed flat after it (docs/bounds.md, "Memory under churn", has the
// figures).
func newChurnPlan(o Options, nodes int, seed uint64) *churnPlan {
	p := &churnPlan{Seed: seed, Users: o.Users, Online: o.Online, Stay: o.Stay, Idle: o.Idle, Waves: o.Waves}
	rnd := rand.New(rand.NewPCG(seed, 8))
	perWave := (p.Users + p.Waves - 1) / p.Waves
	p.Arrive = time.Duration(float64(perWave) / float64(p.Online) * float64(p.Stay))
	p.sessions = p.wave(rnd, "c", p.Users, perWave, p.Arrive, nodes, p.Users)
	p.warm = p.wave(rnd, "w", perWave, perWave, p.Arrive, nodes, p.Users)
	p.residents = ring("res", max(nodes, p.Online/20), nodes)
	return p
}

// wave is n sessions named prefix000000..., perWave to a wave, arriving
// evenly over arrive, each with ChurnContacts contacts drawn among the
// first pool (>= n) such names.
func (p *churnPlan) wave(rnd *rand.Rand, prefix string, n, perWave int, arrive time.Duration, nodes, pool int) []*churnSession {
	name := func(i int) string { return fmt.Sprintf("%s%06d", prefix, i) }
	out := make([]*churnSession, 0, n)
	for i := range n {
		s := &churnSession{User: name(i), Node: i % nodes, Wave: i / perWave,
			At:   time.Duration(float64(arrive) * float64(i%perWave) / float64(perWave)),
			Stay: time.Duration(float64(p.Stay) * (0.5 + rnd.Float64()))}
		for len(s.Contacts) < ChurnContacts && pool > ChurnContacts {
			if c := name(rnd.IntN(pool)); c != s.User && !slices.Contains(s.Contacts, c) {
				s.Contacts = append(s.Contacts, c)
			}
		}
		out = append(out, s)
	}
	return out
}

// ring is n resident sessions named prefix0000..., each subscribed to the
// next ChurnContacts in a ring, arriving over the first second.
func ring(prefix string, n, nodes int) []*churnSession {
	var out []*churnSession
	for i := range n {
		s := &churnSession{User: fmt.Sprintf("%s%04d", prefix, i), Node: i % nodes, Resident: true,
			At: time.Duration(i) * time.Second / time.Duration(n)}
		for k := 1; k <= min(ChurnContacts, n-1); k++ {
			s.Contacts = append(s.Contacts, fmt.Sprintf("%s%04d", prefix, (i+k)%n))
		}
		out = append(out, s)
	}
	return out
}

// window is how long after a device left its lease and its view (and the
// views of its contacts) may still live: idle twice (an idle actor that
// had a message on its way stays for another idle period) and 2 s for the
// debounce (fast preset: 200 ms), the release reaching the lease and the
// harness's own delays (a sample reads the nodes one after another).
func (p *churnPlan) window() time.Duration {
	return 2*p.Idle + 2*time.Second
}

// waves is the churning sessions by wave.
func (p *churnPlan) waves() [][]*churnSession {
	out := make([][]*churnSession, p.Waves)
	for _, s := range p.sessions {
		out[s.Wave] = append(out[s.Wave], s)
	}
	return slices.DeleteFunc(out, func(w []*churnSession) bool { return len(w) == 0 })
}

// writePolicies stores the policy of every user and every contact in the
// cluster's SQLite store before the nodes start (a PUT through the admin
// API would activate each user's view): exact, visible to those who have
// the user as a contact. A warm-up contact that never connects has one
// too, as every contact of a wave has. It answers how many it wrote.
func (p *churnPlan) writePolicies(ctx context.Context, dir string) (int, error) {
	st, err := sqlite.Open(filepath.Join(dir, "presence.db"))
	if err != nil {
		return 0, err
	}
	defer st.Close()
	watchers := map[string][]string{}
	all := slices.Concat(p.residents, p.warm, p.sessions)
	for _, s := range all {
		if _, ok := watchers[s.User]; !ok {
			watchers[s.User] = nil // a policy even if nobody watches
		}
		for _, c := range s.Contacts {
			watchers[c] = append(watchers[c], s.User)
		}
	}
	for _, user := range slices.Sorted(maps.Keys(watchers)) {
		doc := store.PolicyDoc{Granularity: core.Exact, Contacts: watchers[user]}
		if err := st.Put(ctx, user, doc); err != nil {
			return 0, err
		}
	}
	return len(watchers), nil
}
