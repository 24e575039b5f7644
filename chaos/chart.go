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

// Timeline draws each round on a row of its own, over its own time: the
// cluster starting (grey), the scenario running (orange), and a tick at
// the moment of each fault the harness injected (Round.Faults: kill,
// pause, resume, terminate, start, partition, heal), labelled with it.
func (rep *Report) Timeline() template.HTML {
	if len(rep.Rounds) == 0 || rep.Rounds[0].Start.IsZero() {
		return ""
	}
	const rowH = 58.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" width="900" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, float64(len(rep.Rounds))*rowH+4)
	for i, r := range rep.Rounds {
		timelineRow(&b, r, 4+float64(i)*rowH)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped names
}

// timelineRow draws one round at height y: its bar from start to end,
// a tick per fault, and the axis in seconds from its start.
func timelineRow(b *strings.Builder, r *Round, y float64) {
	const w, left, right = 900.0, 10.0, 60.0
	end := r.End
	if end.Before(r.Start.Add(time.Second)) {
		end = r.Start.Add(time.Second)
	}
	x := func(t time.Time) float64 {
		return left + t.Sub(r.Start).Seconds()/end.Sub(r.Start).Seconds()*(w-left-right)
	}
	fault := r.FaultAt
	if fault.IsZero() {
		fault = end
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f">round %d: %s</text>`, left, y+10, r.Index, html.EscapeString(r.Fault))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="%.1f" height="14" fill="#ccc"/>`, x(r.Start), y+16, max(x(fault)-x(r.Start), 1))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="%.1f" height="14" fill="#e8a33d"><title>%.1f s</title></rect>`, x(fault), y+16, max(x(end)-x(fault), 1), end.Sub(fault).Seconds())
	for j, m := range r.Faults {
		label := m.What
		if m.Node != "" {
			label += " " + m.Node
		}
		ly := y + 42 + float64(j%2)*10 // alternate rows so that close ticks stay readable
		fmt.Fprintf(b, `<line class="fault" x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#222" stroke-width="2"><title>%s at %s (+%.3f s)</title></line>`,
			x(m.At), x(m.At), y+13, y+33, html.EscapeString(label), m.At.Format("15:04:05.000"), m.At.Sub(r.Start).Seconds())
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="10">%s</text>`, x(m.At)-8, ly, html.EscapeString(label))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="10">%.1f s</text>`, w-right+4, y+27, end.Sub(r.Start).Seconds())
}
