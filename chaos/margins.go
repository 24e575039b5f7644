package chaos

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// viewLine is a node's debug line of a view publishing or settling.
var viewLine = regexp.MustCompile(`^time=(\S+) .*msg="view: (published|settled)" node=(\S+) user=(\S+) (.*)$`)

// SettleMargins reads the node logs of every round under dir, written with
// --log-level debug, and answers, for each view re-created unsettled that
// a device came up in before it settled, how long before its settle the
// last such device came (`view: published ... unsettled=true`, then `view:
// settled`): what was left of Timing.Settle when its re-register reached
// the view. The smallest shows how close a run came to a false offline
// (docs/bounds.md, the 2+2+1 lease partition); sorted, shortest first. A
// re-register that came after the settle has no margin here: the run's
// false_offline findings show it.
func SettleMargins(dir string) ([]time.Duration, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "round-*", "*.log"))
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, path := range logs {
		m, err := logMargins(path)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	slices.Sort(out)
	return out, nil
}

// logMargins is SettleMargins for one node's log (a view lives on one
// node: its up and its settle are both in that node's log).
func logMargins(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	up := map[string]time.Time{} // view (node and user) -> its latest device up while unsettled
	var out []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `msg="node started"`) {
			clear(up) // a fenced node's next incarnation, same log: its views are new
			continue
		}
		m := viewLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		key := m[3] + " " + m[4]
		switch last, seen := up[key]; {
		case m[2] == "settled":
			if seen {
				out = append(out, at.Sub(last))
			}
			delete(up, key)
		case strings.Contains(m[5], "status=online") && strings.Contains(m[5], "unsettled=true"):
			up[key] = at
		}
	}
	return out, sc.Err()
}
