// The actor list: one node's actors of one kind, a page at a time, through
// GET /api/actors (each state read by the actor itself). The page shown is
// asked again every 2 s, so expiries and timers count down as they run.
"use strict";

const actorsView = { node: "", kind: "connection", q: "", after: "", pages: [], timer: 0, seq: 0 };

function subscribersText(subs) {
  const parts = Object.entries(subs || {}).sort().map(([n, c]) => n + ":" + c);
  return parts.length ? "subscribers " + parts.join(" ") : "no subscriber";
}

// actorState is a kind's short state and its detail line.
function actorState(a) {
  if (a.unanswered) return ["unanswered", "stopped, or did not answer in time"];
  if (a.lease) {
    const l = a.lease;
    if (!l.holder_conn) return ["free", "no holder" + (l.ended ? " (ended: " + l.ended + ")" : "") + ", floor " + l.floor];
    return ["held", "by " + l.holder_conn + " on " + l.holder_node + ", epoch " + l.epoch +
      ", " + expiry(l) + " (renewed " + ms(l.renewed_ago_ms) + " ago)"];
  }
  if (a.view) {
    const v = a.view;
    let d = "version " + v.version + ", " + v.devices + " device(s), " + subscribersText(v.subscribers);
    if (v.debounce_in_ms) d += ", offline publishes in " + ms(v.debounce_in_ms);
    d += v.settled ? ", settled" : ", settles in " + ms(v.settle_in_ms);
    return [v.status, d];
  }
  if (a.connection) {
    const c = a.connection;
    return [c.active ? "active" : "ending", c.user + "/" + c.device + " conn " + c.conn_id + " epoch " + c.epoch + " via " + c.gateway +
      ", last alive " + ms(c.last_alive_ago_ms) + " ago, " + c.subscriptions + " subscription(s)"];
  }
  if (a.gateway) return ["live", a.gateway.connections + " connection(s)"];
  return ["", ""];
}

// loadActors shows the chosen page; only the newest call draws and keeps
// polling (an answer to an older choice that comes late is dropped).
async function loadActors() {
  clearTimeout(actorsView.timer);
  const v = actorsView;
  const seq = ++v.seq;
  const qs = new URLSearchParams({ kind: v.kind, limit: "50" });
  if (v.node) qs.set("node", v.node);
  if (v.q) qs.set("q", v.q);
  if (v.after) qs.set("after", v.after);
  const { status, body } = await getJSON("/api/actors?" + qs).catch((e) => ({ status: 0, body: { error: e.message } }));
  if (seq !== v.seq) return;
  const table = document.querySelector("#actors");
  const tbody = table.querySelector("tbody");
  const info = document.querySelector("#actors-info");
  if (status !== 200) {
    info.textContent = "HTTP " + status + ": " + (body.error || "");
    info.className = "bad";
  } else {
    tbody.replaceChildren();
    for (const a of body.actors) {
      const [state, detail] = actorState(a);
      const tr = el("tr");
      tr.dataset.key = a.key;
      tr.append(el("td", a.key), el("td", state, state), el("td", detail));
      tbody.append(tr);
    }
    table.dataset.node = body.node;
    table.dataset.kind = body.kind;
    table.dataset.rows = body.actors.length;
    v.next = body.next || "";
    info.className = "";
    info.textContent = body.node + ": " + body.total + " live " + body.kind + " actor(s); page " + (v.pages.length + 1) +
      (v.next ? "" : " (last)");
  }
  v.timer = setTimeout(loadActors, 2000);
}

function actorsFromForm() {
  actorsView.node = document.querySelector("#actors-node").value;
  actorsView.kind = document.querySelector("#actors-kind").value;
  actorsView.q = document.querySelector("#actors-q").value.trim();
  actorsView.after = "";
  actorsView.pages = [];
  loadActors();
}

// setActorNodes keeps the node choice in step with the alive members.
function setActorNodes(self, members) {
  const sel = document.querySelector("#actors-node");
  const ids = members.filter((m) => m.state === "alive").map((m) => m.id).sort();
  if (sel.dataset.ids === ids.join(",")) return;
  sel.dataset.ids = ids.join(",");
  const keep = sel.value || self;
  sel.replaceChildren(...ids.map((id) => el("option", id)));
  sel.value = ids.includes(keep) ? keep : self;
  if (!actorsView.node) actorsFromForm();
}

document.querySelector("#actors-form").addEventListener("submit", (e) => {
  e.preventDefault();
  actorsFromForm();
});
document.querySelector("#actors-first").addEventListener("click", actorsFromForm);
document.querySelector("#actors-next").addEventListener("click", () => {
  if (!actorsView.next) return;
  actorsView.pages.push(actorsView.after);
  actorsView.after = actorsView.next;
  loadActors();
});
