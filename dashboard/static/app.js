// The cluster dashboard: no framework, no build step.
"use strict";

const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const headers = token ? { Authorization: "Bearer " + token } : {};
const maxEvents = 200;
const window_ms = 10 * 60 * 1000; // the series' last minutes
let seen = 0;
let bounds = {};
const latencies = []; // {mode, ms, user} of published offlines
const samples = []; // {at_ms, values{connections, actors, events}}
const eventTimes = []; // at_ms of the events seen, for events per 5 s
const renewalSamples = []; // {at_ms, values{renewals}}: lease renewals per second
let lastRenewals = null; // {at, byNode}: the previous poll's counters
const timelineState = {}; // each member's last state in the drawn timeline
let timelineAsked = 0; // when the timeline was last asked again

// agrees: a timeline state and a gossip state say the same
function agrees(t, g) {
  return t === g || (t === "rejoined" && g === "alive") || (t === "fenced" && g !== "alive") || (t === "drain" && g !== "alive");
}
const seenKeys = new Set(); // history and stream overlap: each event once
let replaying = false; // loadHistory draws the timeline once, at the end

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

async function getJSON(path) {
  const res = await fetch(path, { headers });
  const body = await res.json().catch(() => ({}));
  return { status: res.status, body };
}

async function refreshCluster() {
  try {
    const { status, body } = await getJSON("/api/cluster");
    if (status !== 200) throw new Error("HTTP " + status);
    const tbody = document.querySelector("#members tbody");
    tbody.replaceChildren();
    const members = (body.members || []).slice().sort((a, b) => a.id.localeCompare(b.id));
    for (const m of members) {
      const a = (body.actors || {})[m.id] || {};
      const tr = el("tr");
      tr.dataset.member = m.id;
      const state = el("td", m.state, m.state);
      const degraded = (body.degraded || {})[m.id];
      if (degraded && m.state === "alive") {
        // Its fan-out is behind: contact lists pull (docs/protocol.md, "Degraded mode").
        state.append(" ", el("span", "degraded since " + new Date(degraded).toLocaleTimeString(), "degraded"));
      }
      const failing = (body.store_failing || {})[m.id];
      if (failing && m.state === "alive") {
        // Its store calls fail: new handshakes get 503 (docs/operations.md, "The store down, paused or slow").
        state.append(" ", el("span", "store failing: " + failing.join(", "), "store-failing"));
      }
      tr.append(el("td", m.id), state, el("td", new Date(m.since).toLocaleTimeString()));
      for (const k of ["gateway", "connection", "lease", "view"]) {
        tr.append(el("td", m.state === "alive" && k in a ? String(a[k]) : "", "n"));
      }
      tbody.append(tr);
    }
    document.querySelector("#unanswered").textContent =
      body.unanswered ? "no answer from " + body.unanswered.join(", ") : "";
    // The gossip shows a member's new state a moment before its event
    // reaches this node's history: a timeline that disagrees is asked again.
    if (members.some((m) => m.id !== body.self && timelineState[m.id] !== undefined && !agrees(timelineState[m.id], m.state))) {
      if (Date.now() - timelineAsked > 5000) {
        timelineAsked = Date.now();
        refreshTimeline();
      }
    }
    addSample(Date.now(), Object.values(body.actors || {}));
    addRenewals(Date.now(), body.renewals || {});
    setActorNodes(body.self, members);
  } catch (e) {
    document.querySelector("#unanswered").textContent = "cluster: " + e.message;
  }
}

// addSample records the cluster's connections and actors at a time, and
// the events seen in the 5 s before it.
function addSample(at, perNode) {
  let connections = 0, actors = 0;
  for (const c of perNode) {
    connections += c.connection || 0;
    for (const v of Object.values(c)) actors += v;
  }
  const events = eventTimes.filter((t) => t > at - 5000 && t <= at).length;
  samples.push({ at_ms: at, values: { connections, actors, events } });
  while (samples.length && samples[0].at_ms < at - window_ms) samples.shift();
  drawSeries(document.querySelector("#series"), samples, ["connections", "actors", "events"], ["#2266aa", "#070", "#a60"]);
}

// renewalRate is the renewals per second between two readings of every
// member's counter: members in both only, so a member that restarted
// (its counter from zero) or left is no drop.
function renewalRate(prev, cur, dtMs) {
  let sum = 0;
  for (const [n, v] of Object.entries(cur)) {
    if (n in prev && v >= prev[n]) sum += v - prev[n];
  }
  return dtMs > 0 ? Math.round((sum * 1000) / dtMs) : 0;
}

function addRenewals(at, byNode) {
  if (lastRenewals && at - lastRenewals.at >= 900) {
    pushRenewals(at, renewalRate(lastRenewals.byNode, byNode, at - lastRenewals.at));
  }
  if (!lastRenewals || at - lastRenewals.at >= 900) lastRenewals = { at, byNode };
}

function pushRenewals(at, rate) {
  renewalSamples.push({ at_ms: at, values: { renewals: rate } });
  while (renewalSamples.length && renewalSamples[0].at_ms < at - window_ms) renewalSamples.shift();
  drawSeries(document.querySelector("#renewals"), renewalSamples, ["renewals"], ["#7030a0"]);
}

// loadHistory shows what happened before the page opened: the events every
// member sent this node, the membership timeline and the actors over time.
async function loadHistory() {
  const body = await mergeHistory();
  if (!body) return;
  const hs = body.samples || [];
  for (let i = 1; i < hs.length; i++) {
    if (hs[i - 1].renewals && hs[i].renewals) {
      pushRenewals(hs[i].at_ms, renewalRate(hs[i - 1].renewals, hs[i].renewals, hs[i].at_ms - hs[i - 1].at_ms));
    }
  }
  for (const s of body.samples || []) {
    const events = (body.events || []).filter((e) => e.at_ms > s.at_ms - 5000 && e.at_ms <= s.at_ms).length;
    let actors = 0;
    for (const v of Object.values(s.actors)) actors += v;
    samples.push({ at_ms: s.at_ms, values: { connections: s.actors.connection || 0, actors, events } });
  }
}

// mergeHistory adds the events of GET /api/history the page has not shown
// and draws the timeline: at the start, and each time the stream (re)opens,
// so nothing that happened while it was closed or opening is missing.
async function mergeHistory() {
  const { status, body } = await getJSON("/api/history");
  if (status !== 200) return null;
  replaying = true;
  for (const ev of body.events || []) addEvent(ev);
  replaying = false;
  drawTimeline(body.members || {});
  return body;
}

function drawTimeline(members) {
  const tbody = document.querySelector("#timeline tbody");
  tbody.replaceChildren();
  for (const id of Object.keys(members).sort()) {
    const tl = members[id];
    if (tl.length) timelineState[id] = tl[tl.length - 1].state;
    const tr = el("tr");
    tr.dataset.member = id;
    const td = el("td");
    for (const t of members[id]) {
      td.append(el("span", new Date(t.at_ms).toLocaleTimeString() + " " + t.state + " (" + t.seen_by + ")", t.state));
    }
    tr.append(el("td", id), td);
    tbody.append(tr);
  }
}

async function loadBounds() {
  const { body } = await getJSON("/api/bounds");
  bounds = body;
  const tbody = document.querySelector("#bounds tbody");
  for (const [k, v] of Object.entries(body)) {
    if (typeof v !== "number") continue;
    const tr = el("tr");
    tr.append(el("td", k.replace(/_ms$/, "").replace(/_/g, " ")), el("td", v + " ms", "n"));
    tbody.append(tr);
  }
}

function detail(ev) {
  switch (ev.kind) {
    case "device_up": return "via " + ev.gateway;
    case "device_down": return ev.reason;
    case "published": return ev.status + (ev.latency_ms ? " after " + ev.latency_ms + " ms" + (ev.reason ? " (" + ev.reason + ")" : "") : "");
    case "member": return ev.member + " " + ev.reason;
    case "fence": case "drain": return ev.member + " " + ev.kind + ": " + ev.reason;
  }
  return "";
}

function addEvent(ev) {
  const key = [ev.kind, ev.node, ev.at_ms, ev.user, ev.device, ev.member, ev.reason, ev.status].join("|");
  if (seenKeys.has(key)) return;
  seenKeys.add(key);
  eventTimes.push(ev.at_ms);
  while (eventTimes.length && eventTimes[0] < Date.now() - window_ms) eventTimes.shift();
  if (ev.kind === "published" && ev.status === "offline" && ev.latency_ms && ev.reason) {
    latencies.push({ mode: ev.reason, ms: ev.latency_ms, user: ev.user });
    if (latencies.length > 2000) latencies.shift();
    drawLatency(document.querySelector("#latency"), latencies, bounds);
  }
  if (!replaying && ev.user && ev.user === shownUser) showGraph(shownUser);
  if (!replaying && (ev.kind === "member" || ev.kind === "fence" || ev.kind === "drain")) refreshTimeline();
  const tbody = document.querySelector("#events tbody");
  const tr = el("tr");
  tr.dataset.kind = ev.kind;
  tr.append(
    el("td", new Date(ev.at_ms).toLocaleTimeString()),
    el("td", ev.node),
    el("td", ev.kind),
    el("td", ev.user || ""),
    el("td", ev.device || ""),
    el("td", detail(ev), ev.status || ""),
  );
  tr.dataset.at = ev.at_ms;
  // newest first, an event of the history merged late in its place
  const after = [...tbody.children].find((r) => +r.dataset.at < ev.at_ms);
  tbody.insertBefore(tr, after || null);
  while (tbody.children.length > maxEvents) tbody.lastChild.remove();
  document.querySelector("#count").textContent = "(" + (++seen) + " seen)";
}

async function refreshTimeline() {
  const { status, body } = await getJSON("/api/history");
  if (status === 200) drawTimeline(body.members || {});
}

// streamEvents opens the live stream (the server subscribes on every member
// before it answers); each time it opens, the history is merged in.
function streamEvents() {
  const src = new EventSource("/api/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
  const conn = document.querySelector("#conn");
  src.onopen = () => { conn.textContent = "live"; conn.className = "ok"; mergeHistory().catch(() => {}); };
  src.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "bad"; };
  for (const kind of ["device_up", "device_down", "published", "member", "fence", "drain"]) {
    src.addEventListener(kind, (m) => addEvent(JSON.parse(m.data)));
  }
}

let shownUser = "";
let graphTimer = 0;

// showGraph draws the user's actors, again on each of its events and
// every second (a lease's expiry, a pending offline count down).
async function showGraph(user) {
  clearTimeout(graphTimer);
  const { status, body } = await getJSON("/api/users/" + encodeURIComponent(user) + "/graph");
  const svg = document.querySelector("#graph");
  svg.dataset.user = user;
  if (status === 200) {
    drawGraph(svg, body);
    svg.dataset.devices = body.devices.length;
  }
  if (user === shownUser) graphTimer = setTimeout(() => showGraph(user), 1000);
}

document.querySelector("#lookup").addEventListener("submit", async (e) => {
  e.preventDefault();
  const user = document.querySelector("#user").value.trim();
  if (!user) return;
  shownUser = user;
  showGraph(user);
  const [p, r] = await Promise.all([
    getJSON("/api/presence/" + encodeURIComponent(user)),
    getJSON("/api/route/" + encodeURIComponent(user)),
  ]);
  document.querySelector("#result").textContent =
    "presence (" + p.status + ")\n" + JSON.stringify(p.body, null, 2) +
    "\n\nroute (" + r.status + ")\n" + JSON.stringify(r.body, null, 2);
});

// refreshWebhooks shows each endpoint's delivery (GET /api/webhooks): its
// state, the rows waiting in the store, this node's backlog in memory and
// its oldest undelivered.
async function refreshWebhooks() {
  const { status, body } = await getJSON("/api/webhooks").catch(() => ({ status: 0, body: [] }));
  const tbody = document.querySelector("#webhooks tbody");
  tbody.replaceChildren();
  if (status !== 200 || !Array.isArray(body) || body.length === 0) {
    const tr = el("tr");
    tr.append(el("td", status === 200 ? "none configured (--webhook-url)" : "unknown"));
    tbody.append(tr);
    return;
  }
  for (const e of body) {
    const tr = el("tr");
    tr.append(el("td", e.endpoint), el("td", e.state, e.state === "ok" ? "alive" : "dead"), el("td", String(e.waiting), "n"), el("td", String(e.backlog), "n"),
      el("td", e.oldest_s.toFixed(1) + " s", "n"), el("td", e.last_error || ""));
    tbody.append(tr);
  }
}

async function main() {
  const { body } = await getJSON("/api/cluster").catch(() => ({ body: {} }));
  document.querySelector("#node").textContent = "served by " + (body.self || "?");
  await loadBounds();
  drawLatency(document.querySelector("#latency"), latencies, bounds);
  streamEvents();
  await loadHistory().catch(() => {});
  // Each poll after the last answer, never piling up behind a slow member.
  (async function poll() {
    await refreshCluster();
    setTimeout(poll, 1000);
  })();
  (async function pollWebhooks() {
    await refreshWebhooks();
    setTimeout(pollWebhooks, 5000);
  })();
}
main();
