package chaos

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"
	"time"
)

// LatencyChart draws every latency of the run as a dot on its bound's row,
// with the bound as a red line: a dot right of its line broke the bound.
func (rep *Report) LatencyChart() template.HTML {
	by := map[string][]Latency{}
	maxMs := 1.0
	for _, r := range rep.Rounds {
		for _, l := range r.Latencies {
			by[l.Bound] = append(by[l.Bound], l)
			maxMs = max(maxMs, l.Ms, l.BoundMs)
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	slices.Sort(names)
	const w, left, right, rowH = 900.0, 150.0, 50.0, 44.0
	x := func(ms float64) float64 { return left + ms/maxMs*(w-left-right) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="latency" width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, w, float64(len(names))*rowH+30)
	for i, n := range names {
		y := 10 + float64(i)*rowH + rowH/2
		ls := by[n]
		fmt.Fprintf(&b, `<text x="4" y="%.0f">%s (%d)</text><line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#bbb"/>`, y+4, html.EscapeString(n), len(ls), left, w-right, y, y)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#b00" stroke-width="2"/>`, x(ls[0].BoundMs), x(ls[0].BoundMs), y-15, y+15)
		for j, l := range ls {
			color := "#2266aa"
			if l.Ms > l.BoundMs {
				color = "#b00"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.0f" r="3.5" fill="%s" fill-opacity=".6"><title>%s → %s: %.0f ms</title></circle>`,
				x(l.Ms), y+float64(j%5-2)*3, color, html.EscapeString(l.Device), html.EscapeString(l.Watcher), l.Ms)
		}
	}
	axisY := 10 + float64(len(names))*rowH + 12
	for k := range 5 {
		ms := maxMs * float64(k) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%.0f ms</text>`, x(ms)-12, axisY, ms)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped names
}

// Timeline draws each round on one time axis: the cluster starting (grey)
// and the fault running (orange) to its end, labelled with the fault.
func (rep *Report) Timeline() template.HTML {
	if len(rep.Rounds) == 0 || rep.Rounds[0].Start.IsZero() {
		return ""
	}
	t0, t1 := rep.Rounds[0].Start, rep.Rounds[0].Start.Add(time.Second)
	for _, r := range rep.Rounds {
		if r.End.After(t1) {
			t1 = r.End
		}
	}
	const w, left, right, rowH = 900.0, 10.0, 10.0, 26.0
	x := func(t time.Time) float64 { return left + t.Sub(t0).Seconds()/t1.Sub(t0).Seconds()*(w-left-right) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, w, float64(len(rep.Rounds))*rowH+24)
	for i, r := range rep.Rounds {
		y := 4 + float64(i)*rowH
		end := r.End
		if end.IsZero() {
			end = t1
		}
		fault := r.FaultAt
		if fault.IsZero() {
			fault = end
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="18" fill="#ccc"/>`, x(r.Start), y, max(x(fault)-x(r.Start), 1))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="18" fill="#e8a33d"><title>%.1f s</title></rect>`, x(fault), y, max(x(end)-x(fault), 1), end.Sub(fault).Seconds())
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">round %d: %s</text>`, x(r.Start)+4, y+13, r.Index, html.EscapeString(r.Fault))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">0 s</text><text x="%.0f" y="%.0f">%.0f s</text></svg>`,
		left, float64(len(rep.Rounds))*rowH+18, w-right-40, float64(len(rep.Rounds))*rowH+18, t1.Sub(t0).Seconds())
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped names
}
