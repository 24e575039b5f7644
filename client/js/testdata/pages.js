// Runs of PresenceClient that need more than one page, driven by
// sdk_test.go: two tabs sharing the attempt, a hidden tab's heartbeats, a
// page whose Content-Security-Policy forbids the timers' Worker.
import * as m from '/presence.js';

// A node that answers every dial with hello and sends what it is given;
// close(1001) right after hello makes the client dial again at once.
function fakeNode({ interval = 30000, bounce = false, log = [], dialed = () => {} } = {}) {
  return class {
    constructor(url) {
      this.url = new URL(url);
      this.sent = [];
      this.readyState = 0;
      log.push(this);
      dialed(log.length);
      setTimeout(() => {
        this.readyState = 1;
        this.onopen?.();
        this.onmessage?.({ data: JSON.stringify({ hello: { node: 'fake', heartbeat_interval_ms: interval } }) });
        if (bounce) setTimeout(() => { this.readyState = 3; this.onclose?.({ code: 1001, reason: 'bounce' }); }, 0);
      }, 0);
    }
    send(s) { this.sent.push([performance.now(), JSON.parse(s)]); }
    close() { this.readyState = 3; }
  };
}

/**
 * dials connections of a client whose node closes each at once (1001):
 * resolves with the attempt of each, in order. The attempt is the
 * default's (localStorage and IndexedDB), under key.
 */
export async function dialAttempts(dials, key) {
  const log = [];
  let c;
  const done = new Promise((resolve) => {
    c = new m.PresenceClient({ urls: ['ws://tabs.test/ws'], token: 't', trackActivity: false, storageKey: key,
      backoffMinMs: 1, backoffMaxMs: 1, WebSocket: fakeNode({ bounce: true, log, dialed: (n) => n === dials && resolve() }) });
  });
  c.start();
  await done;
  c.stop();
  return log.map((w) => Number(w.url.searchParams.get('attempt')));
}

const clients = {};

/**
 * starts two clients on fake nodes with a heartbeat interval of 100 ms
 * and a draw of 0.5 (a heartbeat every 95 ms): one timing in a Worker
 * (the default), one on the page's timers.
 */
export function startBeating() {
  for (const [name, workerTimers] of [['worker', true], ['page', false]]) {
    const log = [];
    const c = new m.PresenceClient({ urls: ['ws://hidden.test/ws'], token: 't', storage: null, silenceMs: 600000, inputIdleMs: 600000,
      random: () => 0.5, workerTimers, WebSocket: fakeNode({ interval: 100, log }) });
    c.start();
    clients[name] = { c, log };
  }
}

/** What each client of startBeating sent since (performance.now()): heartbeat gaps (ms) and activities. */
export function beats(since) {
  const out = { hidden: document.hidden, now: performance.now() };
  for (const [name, { c, log }] of Object.entries(clients)) {
    const sent = log[0]?.sent ?? [];
    const at = sent.filter(([t, f]) => f.heartbeat && t >= since).map(([t]) => t);
    out[name] = {
      gaps: at.slice(1).map((t, i) => Math.round(t - at[i])),
      activities: sent.filter(([, f]) => f.set_activity).map(([, f]) => f.set_activity.activity),
      activity: c.activity,
    };
  }
  return out;
}

export function stopBeating() { for (const { c } of Object.values(clients)) c.stop(); }


/**
 * sets a timer of 50 ms on the client's timers as soon as they are made
 * (before a Worker the page forbids has failed): resolves whether it fired
 * within a second.
 */
export function firstTimer() {
  const timers = m.clientTimers();
  return Promise.race([new Promise((ok) => timers.set(() => ok(true), 50)), new Promise((ok) => setTimeout(() => ok(false), 1000))]);
}
