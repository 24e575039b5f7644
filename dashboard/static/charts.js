// Charts drawn by the page itself as SVG: no library, no build step.
"use strict";

const svgNS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// ms writes a duration in milliseconds for people.
function ms(v) {
  return Math.abs(v) >= 1000 ? (v / 1000).toFixed(1) + " s" : v + " ms";
}

// expiry says when a held lease expires (overdue: its node stalled).
function expiry(l) {
  return l.expires_in_ms >= 0 ? "expires in " + ms(l.expires_in_ms) : "expiry overdue by " + ms(-l.expires_in_ms);
}

// The leave modes and the /api/bounds field of each one's bound.
const modes = [
  ["close", "graceful_close_ms"],
  ["half_open", "half_open_ms"],
  ["gateway_crash", "gateway_crash_ms"],
  ["owner_crash", "owner_crash_ms"],
];

// drawLatency: one row per leave mode, a dot per published offline at its
// latency, the mode's bound as a red line; the scale fits the largest of
// both, so a dot past its line is a bound broken.
function drawLatency(svg, points, bounds) {
  svg.replaceChildren();
  const w = +svg.getAttribute("width"), left = 110, right = 40, rowH = 40, top = 10;
  let max = 1;
  for (const [m, key] of modes) max = Math.max(max, bounds[key] || 0);
  for (const p of points) max = Math.max(max, p.ms);
  const x = (ms) => left + (ms / max) * (w - left - right);
  modes.forEach(([mode, key], i) => {
    const y = top + i * rowH + rowH / 2;
    const mine = points.filter((p) => p.mode === mode);
    svg.append(svgEl("text", { x: 4, y: y + 4 }, mode + " (" + mine.length + ")"));
    svg.append(svgEl("line", { x1: left, x2: w - right, y1: y, y2: y, class: "axis" }));
    if (bounds[key]) {
      svg.append(svgEl("line", { x1: x(bounds[key]), x2: x(bounds[key]), y1: y - 14, y2: y + 14, class: "bound" }));
    }
    mine.forEach((p, j) => {
      const dot = svgEl("circle", { cx: x(p.ms), cy: y + ((j % 5) - 2) * 3, r: 4, class: "dot" + (p.ms > bounds[key] ? " over" : "") });
      dot.append(svgEl("title", {}, p.user + ": " + p.ms + " ms"));
      svg.append(dot);
    });
  });
  const yAxis = top + modes.length * rowH + 4;
  for (let k = 0; k <= 4; k++) {
    svg.append(svgEl("text", { x: x((max * k) / 4) - 10, y: yAxis + 10 }, Math.round((max * k) / 4) + " ms"));
  }
}

// drawSeries: lines of {at_ms, values{name: n}} over the last minutes, each
// on its own scale (its maximum labelled), time on the x axis.
function drawSeries(svg, samples, names, colors) {
  svg.replaceChildren();
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height"), left = 10, right = 130, top = 10, bottom = 22;
  if (samples.length === 0) return;
  const t0 = samples[0].at_ms, t1 = Math.max(samples[samples.length - 1].at_ms, t0 + 1000);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (w - left - right);
  svg.append(svgEl("line", { x1: left, x2: w - right, y1: h - bottom, y2: h - bottom, class: "axis" }));
  svg.append(svgEl("text", { x: left, y: h - 6 }, new Date(t0).toLocaleTimeString()));
  svg.append(svgEl("text", { x: w - right - 50, y: h - 6 }, new Date(t1).toLocaleTimeString()));
  names.forEach((name, i) => {
    const max = Math.max(1, ...samples.map((s) => s.values[name] || 0));
    const y = (v) => h - bottom - (v / max) * (h - top - bottom);
    const pts = samples.map((s) => x(s.at_ms).toFixed(1) + "," + y(s.values[name] || 0).toFixed(1)).join(" ");
    svg.append(svgEl("polyline", { points: pts, class: "line", stroke: colors[i], "data-series": name, "data-points": samples.length }));
    const last = samples[samples.length - 1].values[name] || 0;
    svg.append(svgEl("text", { x: w - right + 8, y: top + 14 + i * 16, style: "fill:" + colors[i] }, name + " " + last + " (max " + max + ")"));
  });
}

// drawGraph: a user's actors across the nodes, left to right: each
// device's connection (its node) -> its lease (node, epoch, expires in) ->
// the view (node, status, version, subscribers by node, a pending offline).
function drawGraph(svg, g) {
  const rows = Math.max(1, g.devices.length), rowH = 62, boxW = 250, boxH = 54, gap = 50;
  svg.setAttribute("height", rows * rowH + 20);
  svg.replaceChildren();
  const box = (x, y, lines, cls) => {
    const grp = svgEl("g", { class: "node " + (cls || "") });
    grp.append(svgEl("rect", { x, y, width: boxW, height: boxH, rx: 5, fill: "#f4f8fc", stroke: "#2266aa" }));
    lines.forEach((l, i) => grp.append(svgEl("text", { x: x + 8, y: y + 16 + i * 15 }, l)));
    svg.append(grp);
    return grp;
  };
  const viewY = 10 + ((rows - 1) * rowH) / 2, vx = 10 + 2 * (boxW + gap);
  box(vx, viewY, viewLines(g.view), "view " + g.view.status);
  g.devices.forEach((d, i) => {
    const y = 10 + i * rowH;
    box(10, y, ["connection " + d.device + " on " + d.conn_node, d.conn_id], "conn");
    const l = d.lease;
    const until = l ? (l.holder_conn ? expiry(l) : "no holder" + (l.ended ? ": " + l.ended : "")) : "its node did not answer";
    const lease = box(10 + boxW + gap, y, ["lease on " + (d.lease_node || "?"), "epoch " + d.epoch, until], "lease");
    lease.dataset.device = d.device;
    if (l && l.holder_conn) lease.dataset.expiresInMs = l.expires_in_ms;
    svg.append(svgEl("line", { x1: 10 + boxW, y1: y + boxH / 2, x2: 10 + boxW + gap, y2: y + boxH / 2, stroke: "#888" }));
    svg.append(svgEl("line", { x1: 10 + 2 * boxW + gap, y1: y + boxH / 2, x2: vx, y2: viewY + boxH / 2, stroke: "#888" }));
  });
  if (g.devices.length === 0) {
    svg.append(svgEl("text", { x: 10, y: viewY + 26 }, "no device connected"));
  }
}

// viewLines: the view's box, with what the actor itself answered.
function viewLines(v) {
  const lines = ["view on " + (v.node || "?") + ": " + v.status, "version " + v.version + ", " + v.subscribers + " subscriber(s)"];
  const st = v.state;
  if (st) {
    const subs = Object.entries(st.subscribers || {}).sort().map(([n, c]) => n + ":" + c).join(" ");
    let third = subs ? "by node " + subs : "";
    if (st.debounce_in_ms) third += (third ? ", " : "") + "offline in " + ms(st.debounce_in_ms);
    if (!st.settled) third += (third ? ", " : "") + "settles in " + ms(st.settle_in_ms);
    if (third) lines.push(third);
  }
  return lines;
}
