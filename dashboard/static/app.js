// The cluster dashboard: no framework, no build step.
"use strict";

const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const headers = token ? { Authorization: "Bearer " + token } : {};
const maxEvents = 200;
let seen = 0;

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
      tr.append(el("td", m.id), el("td", m.state, m.state), el("td", new Date(m.since).toLocaleTimeString()));
      for (const k of ["gateway", "connection", "lease", "view"]) {
        tr.append(el("td", m.state === "alive" && k in a ? String(a[k]) : "", "n"));
      }
      tbody.append(tr);
    }
    document.querySelector("#unanswered").textContent =
      body.unanswered ? "no answer from " + body.unanswered.join(", ") : "";
  } catch (e) {
    document.querySelector("#unanswered").textContent = "cluster: " + e.message;
  }
}

async function loadBounds() {
  const { body } = await getJSON("/api/bounds");
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
    case "published": return ev.status + (ev.latency_ms ? " after " + ev.latency_ms + " ms" : "");
    case "member": return ev.member + " " + ev.reason;
  }
  return "";
}

function addEvent(ev) {
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
  tbody.prepend(tr);
  while (tbody.children.length > maxEvents) tbody.lastChild.remove();
  document.querySelector("#count").textContent = "(" + (++seen) + " seen)";
}

function streamEvents() {
  const src = new EventSource("/api/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
  const conn = document.querySelector("#conn");
  src.onopen = () => { conn.textContent = "live"; conn.className = "ok"; };
  src.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "bad"; };
  for (const kind of ["device_up", "device_down", "published", "member"]) {
    src.addEventListener(kind, (m) => addEvent(JSON.parse(m.data)));
  }
}

document.querySelector("#lookup").addEventListener("submit", async (e) => {
  e.preventDefault();
  const user = document.querySelector("#user").value.trim();
  if (!user) return;
  const [p, r] = await Promise.all([
    getJSON("/api/presence/" + encodeURIComponent(user)),
    getJSON("/api/route/" + encodeURIComponent(user)),
  ]);
  document.querySelector("#result").textContent =
    "presence (" + p.status + ")\n" + JSON.stringify(p.body, null, 2) +
    "\n\nroute (" + r.status + ")\n" + JSON.stringify(r.body, null, 2);
});

async function main() {
  const { body } = await getJSON("/api/cluster").catch(() => ({ body: {} }));
  document.querySelector("#node").textContent = "served by " + (body.self || "?");
  loadBounds();
  // Each poll after the last answer, never piling up behind a slow member.
  (async function poll() {
    await refreshCluster();
    setTimeout(poll, 1000);
  })();
  streamEvents();
}
main();
