package chaos

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	dash  bool
	ys    []float64
}

// panel is one chart: lines over time on a left axis and the devices
// online as a grey area on a right axis of its own.
type panel struct {
	title, unit string
	lines       []series
	online      []float64
}

var nodeColors = []string{"#2266aa", "#cc6600", "#228833", "#aa3377", "#666666"}

// Charts draws the churn round's samples: the cluster's live actors by
// kind (and the most the checks allowed), then each node's RSS and heap,
// both against the devices online.
func (c *Churn) Charts() template.HTML {
	if c == nil || len(c.Samples) < 2 {
		return ""
	}
	t0 := c.Samples[0].At
	var xs, online []float64
	col := func(f func(ChurnSample) float64) []float64 {
		out := make([]float64, len(c.Samples))
		for i, s := range c.Samples {
			out[i] = f(s)
		}
		return out
	}
	for _, s := range c.Samples {
		xs = append(xs, s.At.Sub(t0).Seconds())
		online = append(online, float64(s.Online))
	}
	actors := panel{title: "live actors over the cluster", unit: "actors", online: online, lines: []series{
		{"leases", "#2266aa", false, col(func(s ChurnSample) float64 { return s.total(leaseOf) })},
		{"views", "#cc6600", false, col(func(s ChurnSample) float64 { return s.total(viewOf) })},
		{"connections", "#228833", false, col(func(s ChurnSample) float64 { return s.total(func(n NodeSample) float64 { return n.Connection }) })},
		{"leases allowed", "#2266aa", true, col(func(s ChurnSample) float64 { return s.LeaseLimit })},
		{"views allowed", "#cc6600", true, col(func(s ChurnSample) float64 { return s.ViewLimit })},
	}}
	mem := panel{title: "memory per node (solid RSS, dashed heap in use)", unit: "MB", online: online}
	for i, n := range c.Samples[0].Nodes {
		color := nodeColors[i%len(nodeColors)]
		mem.lines = append(mem.lines,
			series{n.Node + " RSS", color, false, col(func(s ChurnSample) float64 { return s.Nodes[i].RSS / 1e6 })},
			series{n.Node + " heap", color, true, col(func(s ChurnSample) float64 { return s.Nodes[i].Heap / 1e6 })})
	}
	var b strings.Builder
	for _, p := range []panel{actors, mem} {
		p.draw(&b, xs, c.Phases, t0)
	}
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped names
}

// draw writes p as one SVG.
func (p panel) draw(b *strings.Builder, xs []float64, phases []Phase, t0 time.Time) {
	const w, h, left, right, top, bottom = 900.0, 300.0, 60.0, 60.0, 24.0, 40.0
	xmax := xs[len(xs)-1]
	ymax, omax := 1.0, 1.0
	for _, s := range p.lines {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	for _, o := range p.online {
		omax = max(omax, o)
	}
	x := func(v float64) float64 { return left + v/xmax*(w-left-right) }
	y := func(v, top2 float64) float64 { return top + (1-v/top2)*(h-top-bottom) }
	fmt.Fprintf(b, `<svg class="churn" width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg"><text x="%.0f" y="14">%s</text>`, w, h, left, html.EscapeString(p.title))
	area := fmt.Sprintf("M%.1f,%.1f", x(0), y(0, omax))
	for i, o := range p.online {
		area += fmt.Sprintf(" L%.1f,%.1f", x(xs[i]), y(o, omax))
	}
	fmt.Fprintf(b, `<path d="%s L%.1f,%.1f Z" fill="#ddd"/>`, area, x(xmax), y(0, omax))
	for _, s := range p.lines {
		pts := make([]string, len(xs))
		for i := range xs {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(xs[i]), y(s.ys[i], ymax))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"%s><title>%s</title></polyline>`, strings.Join(pts, " "), s.color, dash, html.EscapeString(s.name))
	}
	p.axes(b, xs, phases, t0, x, func(v float64) float64 { return y(v, ymax) }, ymax, omax)
	b.WriteString(`</svg>`)
}

// axes writes the ticks, the phases and the legend.
func (p panel) axes(b *strings.Builder, xs []float64, phases []Phase, t0 time.Time, x, y func(float64) float64, ymax, omax float64) {
	const w, h = 900.0, 300.0
	for k := range 5 {
		v := ymax * float64(k) / 4
		fmt.Fprintf(b, `<text x="2" y="%.0f" font-size="11">%.0f</text><text x="%.0f" y="%.0f" font-size="11" fill="#888">%.0f</text>`, y(v)+4, v, w-55, y(v)+4, omax*float64(k)/4)
	}
	xmax := xs[len(xs)-1]
	for k := range 6 {
		v := xmax * float64(k) / 5
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11">%.0f s</text>`, x(v)-10, h-22, v)
	}
	for i, ph := range phases {
		if v := ph.At.Sub(t0).Seconds(); v >= 0 && v <= xmax {
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="20" y2="%.0f" stroke="#999" stroke-dasharray="2,2"/><text x="%.1f" y="%.0f" font-size="10" fill="#555">%s</text>`,
				x(v), x(v), h-40, x(v)+2, 32+float64(i%3)*11, html.EscapeString(ph.Name))
		}
	}
	legend := 60.0
	for _, s := range p.lines {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" fill="%s">%s</text>`, legend, h-6, s.color, html.EscapeString(s.name))
		legend += float64(len(s.name))*6.5 + 14
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" fill="#888">grey: devices online (right axis)</text>`, legend, h-6)
}
