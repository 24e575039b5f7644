// presence.js: the browser SDK of presence, one ES module with no build
// step and no dependency. It keeps a device online as the Go SDK (package
// client) does, on the JSON subprotocol of docs/protocol.md: failover over
// a list of node URLs, an attempt number that only grows (claimed in
// IndexedDB and kept in localStorage, across reloads and tabs), heartbeats
// at the hello's interval with jitter (timed in a dedicated Worker, so a
// hidden tab keeps them), back-off with full jitter, a silence limit, the
// close codes, resubscription after every reconnect and resync, version
// checks per target, token refresh, declared activity from the Page
// Visibility API and input events, status, tiers, group queries and the
// node's degraded mode (pulling the targets it stopped pushing).
//
//   import { PresenceClient } from '/sdk/presence.js';
//   const p = new PresenceClient({ urls: ['ws://127.0.0.1:7600/ws'], token, refresh: getToken });
//   p.addEventListener('presence', (e) => render(e.detail.presence));
//   p.start();
//   p.subscribe(['alice', 'bob']);
//
// Served by every node at GET /sdk/presence.js; types in presence.d.ts.

/** The JSON subprotocol (presence.v1.json: protojson, proto field names). */
export const SUBPROTOCOL = 'presence.v1.json';
/** The longest user or device id. */
export const MAX_ID_LEN = 128;
/** Targets of one subscribe, unsubscribe or query. */
export const MAX_TARGETS = 1000;
/** Characters of a status text. */
export const MAX_STATUS_TEXT = 140;
/** The largest ?attempt= a node takes: 2^53 - 1. */
export const MAX_ATTEMPT = Number.MAX_SAFE_INTEGER;
/**
 * The largest message a node reads, in bytes: it closes a larger one with
 * 1009. The Go constant is messages.MaxMessage; a test keeps them equal.
 */
export const MAX_MESSAGE = 65536;
/** Dials in a row that never opened, with one token, before the client gives up (refusedLimit). */
export const REFUSED_LIMIT = 10;

/**
 * Close codes (docs/protocol.md, "Close codes"; messages.CloseCode in Go,
 * a test keeps them equal). ABNORMAL is the browser's own: a connection
 * cut without a close frame.
 */
export const Close = Object.freeze({
  GOING_AWAY: 1001, PROTOCOL_ERROR: 1002, WRONG_TYPE: 1003, ABNORMAL: 1006, INVALID_DATA: 1007, TOO_BIG: 1009,
  SUPERSEDED: 4001, OVERFLOW: 4008, TOKEN_EXPIRED: 4401, STATE_SYNC: 4409,
});

export const SHOWS = Object.freeze(['available', 'away', 'dnd', 'invisible', 'auto']);
export const ACTIVITIES = Object.freeze(['active', 'idle', 'background']);
export const TIERS = Object.freeze(['realtime', 'batched']);
export const PLATFORMS = Object.freeze(['mobile', 'desktop', 'web', 'other']);

/** A request the protocol refuses, refused before it is sent: the message names the rule. */
export class InputError extends Error {
  constructor(message) { super(message); this.name = 'InputError'; }
}

/**
 * An error frame of the node: code is HTTP-like (400 a broken rule, 413 too
 * many subscriptions, 429 slow down), retryAfterMs how long to wait (429),
 * requestId the refused subscribe's or query's.
 */
export class PresenceError extends Error {
  constructor(code, message, retryAfterMs = 0, requestId = '') {
    super(`presence: the node refused (${code}): ${message}`);
    this.name = 'PresenceError';
    this.code = code;
    this.serverMessage = message;
    this.retryAfterMs = retryAfterMs;
    this.requestId = requestId;
  }
}

/** Why a client ended, or a query failed: code is the close code (0: none). */
export class ClosedError extends Error {
  constructor(message, code = 0) { super(message); this.name = 'ClosedError'; this.code = code; }
}

/**
 * The client gave up: dials dials in a row never opened with the same
 * token (refresh, if given, gave no other). A browser does not show why a
 * handshake failed: a 401 (a token the node does not take), 403, 409, 429
 * or 503, or no node reachable at all.
 */
export class RefusedError extends ClosedError {
  constructor(message, dials) { super(message, 0); this.name = 'RefusedError'; this.dials = dials; }
}

// ---- pure parts (tested in the browser: client/js/sdk_test.go) ----

/** Versions are JSON strings of uint64: compared as BigInt (-1, 0, 1); absent is 0. */
export function compareVersions(a, b) {
  const x = BigInt(a ?? 0), y = BigInt(b ?? 0);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The next back-off bound: doubled, at most max. */
export function nextBackoff(cur, max) { return Math.min(2 * cur, max); }

/** Full jitter: a wait uniform in [0, bound). */
export function drawBackoff(bound, random = Math.random) { return random() * bound; }

/** A heartbeat's delay: the interval shortened at random by up to jitter (0.1: 10%). */
export function heartbeatDelay(intervalMs, jitter = 0.1, random = Math.random) {
  return intervalMs - jitter * random() * intervalMs;
}

/** How long a connection may hear nothing: 2.5 heartbeat intervals, at least 2 s. */
export function silenceLimit(intervalMs) { return Math.max(2.5 * intervalMs, 2000); }

/** The most heartbeats in a row of which none asks for an ack: an RTT sample at least this often. */
export const ASK_EVERY = 10;

/**
 * Whether a heartbeat asks the node for an ack (docs/protocol.md, "Acks on
 * request"), as the Go SDK's AckPolicy: beats is the heartbeats since the
 * last that asked, this one included (Infinity before any), quietMs how
 * long the connection heard nothing. The first asks, the ASK_EVERY-th
 * after the last that asked, and any sent after hearing nothing for longer
 * than the interval or than silence - 1.5 intervals, whichever is less: an
 * idle connection asks every other heartbeat, and an ack asked for has at
 * least half an interval left before the silence limit.
 */
export function asksAck(beats, quietMs, intervalMs, silenceMs) {
  return beats >= ASK_EVERY || quietMs > Math.min(intervalMs, silenceMs - 1.5 * intervalMs);
}

/**
 * The next attempt number, max(stored + 1, now), kept in storage under key
 * so that it grows across reloads (a storage that throws, as in some
 * private modes, keeps it in memory only). Tabs dialing at once may read
 * the same value (a tab's localStorage sees another's writes later):
 * claimAttempt is the one that never collides.
 */
export function nextAttempt(storage, key, now = Date.now()) {
  let stored = 0;
  try { stored = Number(storage?.getItem(key)) || 0; } catch { /* no storage */ }
  const next = Math.min(Math.max(stored + 1, Math.floor(now)), MAX_ATTEMPT);
  try { storage?.setItem(key, String(next)); } catch { /* no storage */ }
  return next;
}

let attemptsDB = null; // this page's connection to the attempts database

function openAttempts() {
  attemptsDB ??= new Promise((resolve, reject) => {
    const r = indexedDB.open('presence', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('attempts');
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.onblocked = () => reject(new Error('presence: the attempts database is blocked'));
  });
  return attemptsDB;
}

/**
 * The next attempt number claimed atomically across the tabs of this
 * origin: in one IndexedDB read-write transaction (those on one store run
 * one after the other, whatever the tab), max(stored + 1, now), with the
 * value in storage as a floor and a copy. Without IndexedDB, or when it
 * fails: nextAttempt on storage.
 */
export async function claimAttempt(storage, key, now = Date.now()) {
  if (!storage || typeof indexedDB === 'undefined') return nextAttempt(storage, key, now);
  try {
    const db = await openAttempts();
    return await new Promise((resolve, reject) => {
      const tx = db.transaction('attempts', 'readwrite'), store = tx.objectStore('attempts');
      let next = 0;
      const got = store.get(key);
      got.onsuccess = () => {
        let stored = Number(got.result) || 0;
        try { stored = Math.max(stored, Number(storage.getItem(key)) || 0); } catch { /* no storage */ }
        next = Math.min(Math.max(stored + 1, Math.floor(now)), MAX_ATTEMPT);
        store.put(next, key);
      };
      tx.oncomplete = () => {
        try { storage.setItem(key, String(next)); } catch { /* no storage */ }
        resolve(next);
      };
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  } catch {
    return nextAttempt(storage, key, now);
  }
}

/** Checks a user or device id as the node does (core.ValidID): throws an InputError naming the rule. */
export function validId(kind, id) {
  if (typeof id !== 'string' || id.length < 1 || id.length > MAX_ID_LEN) {
    throw new InputError(`${kind} id must be 1 to ${MAX_ID_LEN} characters, got ${typeof id === 'string' ? id.length : typeof id}`);
  }
  if (id.includes('..')) throw new InputError(`${kind} id ${JSON.stringify(id)} has "..": not allowed`);
  const bad = id.match(/[^A-Za-z0-9._\-@:]/);
  if (bad) {
    throw new InputError(`${kind} id ${JSON.stringify(id)} has ${JSON.stringify(bad[0])}: only letters, digits and . _ - @ : are allowed (no "/")`);
  }
}

/** Checks the targets of one request: 1 to 1000 valid ids. */
export function validTargets(op, targets) {
  if (!Array.isArray(targets) || targets.length < 1 || targets.length > MAX_TARGETS) {
    const n = Array.isArray(targets) ? targets.length : typeof targets;
    throw new InputError(`${op}: ${n} targets: must be 1 to ${MAX_TARGETS}`);
  }
  for (const t of targets) validId('target', t);
}

const utf8 = new TextEncoder();

/** The bytes of frame as the client sends it: the UTF-8 of its JSON. */
export function frameBytes(frame) { return utf8.encode(JSON.stringify(frame)).length; }

/** Checks that frame fits in one message of the node (MAX_MESSAGE bytes): throws an InputError naming the rule. */
export function validFrame(op, frame) {
  const n = frameBytes(frame);
  if (n > MAX_MESSAGE) {
    throw new InputError(`${op}: the frame would be ${n} bytes: a message is at most ${MAX_MESSAGE} bytes (the node closes a larger one with 1009): send fewer targets at a time`);
  }
}

// the longest request id the client makes: frames are sized with it
const LONGEST_ID = `s${Number.MAX_SAFE_INTEGER}`;

/**
 * Splits targets into requests of at most MAX_TARGETS whose frames,
 * frame(targets, LONGEST_ID), fit in MAX_MESSAGE bytes: a target adds its
 * JSON and a comma.
 */
export function chunkTargets(targets, frame) {
  const base = frameBytes(frame([], LONGEST_ID)), out = [];
  let cur = [], size = base;
  for (const t of targets) {
    const cost = utf8.encode(JSON.stringify(t)).length;
    if (cur.length && (cur.length === MAX_TARGETS || size + 1 + cost > MAX_MESSAGE)) {
      out.push(cur);
      cur = []; size = base;
    }
    size += cost + (cur.length ? 1 : 0);
    cur.push(t);
  }
  if (cur.length) out.push(cur);
  return out;
}

const subscribeFrame = (tier) => (targets, id) => ({ subscribe: tier === 'realtime' ? { request_id: id, targets } : { request_id: id, targets, tier } });
const queryFrame = (targets, id) => ({ query: { request_id: id, targets } });
const unsubscribeFrame = (targets) => ({ unsubscribe: { targets } });

/** Checks a set_status as the node does (core.ValidStatus). */
export function validStatus({ show, text = '', expiresMs = 0 } = {}, now = Date.now()) {
  if (!SHOWS.includes(show)) throw new InputError(`set_status: show must be ${SHOWS.join(', ')}`);
  if (typeof text !== 'string') throw new InputError('set_status: text must be a string');
  const chars = [...text].length;
  if (chars > MAX_STATUS_TEXT) throw new InputError(`set_status: text has ${chars} characters: at most ${MAX_STATUS_TEXT}`);
  if (/\p{Cc}/u.test(text)) throw new InputError('set_status: text holds a control character');
  if (/\p{Cs}/u.test(text)) throw new InputError('set_status: text is not valid UTF-8 (a lone surrogate)');
  if (expiresMs && !(expiresMs > now)) throw new InputError(`set_status: expiresMs ${expiresMs} is not in the future (now ${now})`);
}

/**
 * The expiry of a presence token (base64url(user "\n" device "\n" expiry)
 * "." mac) in Unix ms, or null if it is not one: a browser cannot see a
 * handshake's 401, so the SDK refreshes an expired token before dialing.
 */
export function tokenExpiryMs(token) {
  try {
    const b64 = token.split('.')[0].replace(/-/g, '+').replace(/_/g, '/');
    const parts = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)).split('\n');
    const s = Number(parts[2]);
    return parts.length === 3 && Number.isInteger(s) ? s * 1000 : null;
  } catch {
    return null;
  }
}

// ---- timers ----

// A hidden tab's page timers run at most once a second in Chrome (after
// five hidden minutes, once a minute): at the fast timings a heartbeat
// would come after the node's stale limit. A dedicated Worker's timers
// are not slowed down, and its messages reach a hidden page at once, so
// the client times everything there, the socket staying on the page.
const workerSource = `const t = new Map();
onmessage = ({ data: [id, ms] }) => {
  clearTimeout(t.get(id));
  t.delete(id);
  if (ms >= 0) t.set(id, setTimeout(() => { t.delete(id); postMessage(id); }, ms));
};`;

/** The page's timers: set(fn, ms) returns an id for clear(id). */
export const pageTimers = Object.freeze({ set: (fn, ms) => setTimeout(fn, ms), clear: (id) => clearTimeout(id) });

// Timers run by a Worker; once it fails (a Content-Security-Policy without
// worker-src blob:, for one) those pending and all later ones are the
// page's.
class WorkerTimers {
  #w; #pending = new Map(); #next = 0; #broken = false;
  constructor(w) {
    this.#w = w;
    w.onmessage = ({ data: id }) => this.#fire(id);
    w.onerror = () => {
      this.#broken = true;
      for (const [id, p] of this.#pending) p.page = setTimeout(() => this.#fire(id), Math.max(0, p.due - performance.now()));
    };
  }

  #fire(id) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.page);
    p.fn();
  }

  set(fn, ms) {
    const id = ++this.#next, p = { fn, due: performance.now() + ms, page: 0 };
    this.#pending.set(id, p);
    if (this.#broken) p.page = setTimeout(() => this.#fire(id), ms);
    else this.#w.postMessage([id, Math.max(0, ms)]);
    return id;
  }

  clear(id) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.page);
    if (!this.#broken) this.#w.postMessage([id, -1]);
  }
}

let workerTimers; // one Worker for the page's clients, made at the first start(); null: none could be made

/** The timers of a client: a Worker's where one can be made and useWorker, else the page's. */
export function clientTimers(useWorker = true) {
  if (!useWorker || typeof Worker === 'undefined') return pageTimers;
  if (workerTimers === undefined) {
    try {
      workerTimers = new WorkerTimers(new Worker(URL.createObjectURL(new Blob([workerSource], { type: 'text/javascript' }))));
    } catch {
      workerTimers = null; // refused at once (a Content-Security-Policy)
    }
  }
  return workerTimers ?? pageTimers;
}

// ---- the client ----

const defaults = {
  urls: [], token: '', refresh: null, platform: 'web', deviceClass: '',
  backoffMinMs: 100, backoffMaxMs: 30000, jitter: 0.1, silenceMs: 0, dialTimeoutMs: 10000, refusedLimit: REFUSED_LIMIT,
  storageKey: 'presence.attempt', trackActivity: true, inputIdleMs: 120000, random: Math.random, workerTimers: true,
};

/** The client's defaults: backoffMinMs, silenceMs (0: silenceLimit of the hello's interval) and the others of Options. */
export const DEFAULTS = Object.freeze({ ...defaults });

/**
 * PresenceClient keeps one device connected, heartbeating and subscribed.
 * Events (an EventTarget): presence {presence, snapshot}, snapshot
 * {requestId, targets, presences}, state {state, url, node, attempt, code,
 * reason}, error {error}, closed {error, code}, degraded {targets, pulling,
 * retryAfterMs}, restored {targets, ended}.
 */
export class PresenceClient extends EventTarget {
  #o; #ws = null; #hello = null; #stopped = true; #attempt = 0;
  #targets = new Map(); // target -> tier
  #state = new Map(); // target -> latest presence kept
  #asked = new Map(); // subscribe request id -> its targets, until its snapshot
  #queries = new Map(); // query request id -> {resolve, reject}
  #reqs = 0; #status = null; #activity = ''; #conns = 0; #lostAt = 0; #gap = 0; #rtt = 0; #ended = false; #gen = 0;
  #wake = null; #inputAt = 0; #idleTimer = 0; #unwatch = null; #t = pageTimers;
  #pulling = new Set(); // targets the node degraded to pull, until restored or the connection ends
  #stopPull = null; // ends this connection's pull loop

  constructor(options) {
    super();
    this.#o = { ...defaults, ...options };
    if (!Array.isArray(this.#o.urls) || this.#o.urls.length === 0) throw new InputError('urls: at least one node URL');
    if (this.#o.platform && !PLATFORMS.includes(this.#o.platform)) throw new InputError(`platform must be ${PLATFORMS.join(', ')}`);
    this.#o.storage = 'storage' in (options ?? {}) ? options.storage : globalThis.localStorage;
    this.#o.WebSocket = this.#o.WebSocket ?? globalThis.WebSocket;
    if (this.#o.activity) this.#activity = this.#checkActivity(this.#o.activity);
  }

  /** Starts connecting (again, after stop). */
  start() {
    if (!this.#stopped) return this;
    this.#stopped = false;
    this.#ended = false;
    this.#t = clientTimers(this.#o.workerTimers);
    if (this.#o.trackActivity && typeof document !== 'undefined') this.#watchActivity();
    this.#run().catch((err) => this.#finish(err));
    return this;
  }

  /** Stops: closes the connection normally; the client emits closed. */
  stop() {
    if (this.#stopped) return;
    this.#finish(null);
  }

  /** The current connection's hello, null while disconnected. */
  get hello() { return this.#hello; }
  get connected() { return this.#hello !== null; }
  /** The last attempt number used. */
  get attempt() { return this.#attempt; }
  /** Connections made so far. */
  get connections() { return this.#conns; }
  /** Ms without a connection before the current one (0 before a reconnect). */
  get gapMs() { return this.#gap; }
  /** The round trip of the last heartbeat the node acked, in ms (0 before the first). */
  get rttMs() { return this.#rtt; }
  /** The declared activity ('' while none is declared). */
  get activity() { return this.#activity; }
  /**
   * The targets the node degraded to pull (its fan-out fell behind), in
   * order: the client queries them itself until the node restores push.
   * An app may show that their updates are slower.
   */
  pulling() { return [...this.#pulling].sort(); }

  /** The newest presence kept for target, or undefined (absent: not visible, or not subscribed). */
  state(target) { return this.#state.get(target); }
  /** Every target's newest presence. */
  states() { return new Map(this.#state); }

  /** Subscribes to targets in tier (realtime, the default, or batched); again after every reconnect. */
  subscribe(targets, { tier = 'realtime' } = {}) {
    validTargets('subscribe', targets);
    if (!TIERS.includes(tier)) throw new InputError(`subscribe: tier must be ${TIERS.join(' or ')}`);
    validFrame('subscribe', subscribeFrame(tier)(targets, LONGEST_ID));
    for (const t of targets) this.#targets.set(t, tier);
    if (this.connected) this.#sendSubscribe([...targets], tier);
  }

  /** Unsubscribes targets and forgets their state. */
  unsubscribe(targets) {
    validTargets('unsubscribe', targets);
    validFrame('unsubscribe', unsubscribeFrame(targets));
    for (const t of targets) { this.#targets.delete(t); this.#state.delete(t); }
    if (this.connected) this.#send(unsubscribeFrame([...targets]));
  }

  /**
   * The presence of targets once (a group page): resolves with the
   * snapshot's presences (a hidden target is absent), rejects with a
   * PresenceError the node answered, or a ClosedError if the connection
   * ends first. Nothing is subscribed, state() unchanged. An aborted
   * signal rejects it with signal.reason and its answer is dropped.
   */
  query(targets, { signal } = {}) {
    validTargets('query', targets);
    validFrame('query', queryFrame(targets, LONGEST_ID));
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (!this.connected) return Promise.reject(new ClosedError('presence: not connected'));
    const id = `q${++this.#reqs}`;
    return new Promise((resolve, reject) => {
      const abort = () => { this.#queries.delete(id); reject(signal.reason); };
      const done = (f) => (v) => { signal?.removeEventListener('abort', abort); f(v); };
      this.#queries.set(id, { resolve: done(resolve), reject: done(reject) });
      signal?.addEventListener('abort', abort, { once: true });
      this.#send(queryFrame([...targets], id));
    });
  }

  /** Sets the user's show and status text until expiresMs (Unix ms; 0: until changed); told again after every reconnect. */
  setStatus({ show, text = '', expiresMs = 0 }) {
    validStatus({ show, text, expiresMs });
    this.#status = { show, text, expiresMs };
    if (this.connected) this.#sendStatus();
  }

  /** Declares what the device is doing (active, idle, background); sent only if it changed. */
  setActivity(activity) {
    this.#checkActivity(activity);
    if (this.#activity === activity) return;
    this.#activity = activity;
    if (this.connected) this.#send({ set_activity: { activity } });
  }

  #checkActivity(a) {
    if (!ACTIVITIES.includes(a)) throw new InputError(`set_activity: activity must be ${ACTIVITIES.join(', ')}`);
    return a;
  }

  #emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }

  #send(frame) {
    if (this.#ws?.readyState === 1) this.#ws.send(JSON.stringify(frame));
  }

  #sendSubscribe(targets, tier) {
    const id = `s${++this.#reqs}`;
    this.#asked.set(id, targets);
    this.#send(subscribeFrame(tier)(targets, id));
  }

  // every target again, a request per tier and per MAX_TARGETS targets or
  // MAX_MESSAGE bytes (subscribes of many calls together may hold more)
  #subscribeAll() {
    for (const tier of TIERS) {
      const ts = [...this.#targets].filter(([, t]) => t === tier).map(([k]) => k).sort();
      for (const chunk of chunkTargets(ts, subscribeFrame(tier))) this.#sendSubscribe(chunk, tier);
    }
  }

  #sendStatus() {
    const s = this.#status;
    if (!s || (s.expiresMs && s.expiresMs <= Date.now())) return;
    const st = { show: s.show };
    if (s.text) st.text = s.text;
    if (s.expiresMs) st.expires_ms = String(s.expiresMs);
    this.#send({ set_status: st });
  }

  // ---- the connection loop ----

  // the loop of one start(): a stop(), or a start() after it, ends it.
  // The back-off starts again only after a healthy connection: one a node
  // closes at once (a frame it refuses, 1002 to 1009) waits longer each time.
  async #run() {
    const gen = ++this.#gen, over = () => this.#stopped || gen !== this.#gen;
    let backoff = this.#o.backoffMinMs, url = 0, refused = 0;
    while (!over()) {
      if (!(await this.#freshToken()) || over()) return;
      const target = this.#o.urls[url % this.#o.urls.length];
      const conn = await this.#dial(target);
      if (over()) { conn?.ws?.close(1000); return; }
      if (!conn.ws) {
        // a browser sees no handshake status (401, 409, 429, 503 all look
        // like a lost connection): the next URL, after a drawn wait
        refused = conn.opened ? 0 : refused + 1;
        if (refused >= this.#o.refusedLimit && this.#o.refusedLimit > 0) {
          if (!(await this.#refused(refused)) || over()) return;
          refused = 0;
        }
        url++;
        await this.#sleep(drawBackoff(backoff, this.#o.random));
        backoff = nextBackoff(backoff, this.#o.backoffMaxMs);
        continue;
      }
      refused = 0;
      const end = await this.#serve(conn, target);
      if (over()) return;
      if (end.healthy) backoff = this.#o.backoffMinMs;
      const next = await this.#after(end, backoff);
      if (!end.healthy) backoff = nextBackoff(backoff, this.#o.backoffMaxMs);
      if (next === 'stop') return;
      if (next === 'next') url++;
    }
  }

  // refusedLimit dials in a row never opened: a new token from refresh, or
  // the end (false) with a RefusedError when there is none or it is the same
  async #refused(dials) {
    const before = this.#o.token;
    const why = `presence: ${dials} dials in a row never opened with the same token (a browser does not show why: `
      + 'a token the node refuses, 401, or 403, 409, 429, 503, or no node reachable)';
    if (this.#o.refresh) {
      try {
        const token = await this.#o.refresh();
        if (typeof token === 'string' && token !== '' && token !== before) {
          this.#o.token = token;
          return !this.#stopped;
        }
      } catch (err) {
        this.#finish(new RefusedError(`${why}: refreshing the token: ${err?.message ?? err}`, dials));
        return false;
      }
    }
    this.#finish(new RefusedError(`${why}${this.#o.refresh ? ' and refresh gave no other token' : ''}: giving up`, dials));
    return false;
  }

  // what follows a connection's end: 'stop', 'next' (URL) or 'same'
  async #after({ code, reason }, backoff) {
    switch (code) {
      case Close.SUPERSEDED:
        this.#finish(new ClosedError('presence: superseded by a newer connection of this device (4001)', code));
        return 'stop';
      case Close.GOING_AWAY: case 'silent':
        return 'next'; // at once: its node drains, fenced or died
      case Close.ABNORMAL:
        // cut without a close frame: its node may be gone, any node serves
        await this.#sleep(drawBackoff(backoff, this.#o.random));
        return 'next';
      case Close.OVERFLOW:
        return 'same'; // at once, resubscribing
      case Close.TOKEN_EXPIRED: case Close.STATE_SYNC:
        return (await this.#refresh(code, reason)) ? 'same' : 'stop';
      default:
        await this.#sleep(drawBackoff(backoff, this.#o.random));
        return 'same';
    }
  }

  // refreshes a token that has expired by its own expiry before dialing
  async #freshToken() {
    const exp = tokenExpiryMs(this.#o.token);
    return exp === null || exp > Date.now() || this.#refresh(Close.TOKEN_EXPIRED, 'token expired');
  }

  // a new token from options.refresh after 4401 or 4409; false: stopped
  async #refresh(code) {
    const why = code === Close.STATE_SYNC
      ? 'presence: the node asks to authenticate again, state sync failed (4409)'
      : 'presence: the token expired (4401)';
    if (!this.#o.refresh) {
      this.#finish(new ClosedError(`${why} and no refresh callback was given`, code));
      return false;
    }
    try {
      const token = await this.#o.refresh();
      if (typeof token !== 'string' || token === '') throw new Error('refresh gave no token');
      this.#o.token = token;
      return !this.#stopped;
    } catch (err) {
      this.#finish(new ClosedError(`${why}: refreshing the token: ${err?.message ?? err}`, code));
      return false;
    }
  }

  async #handshakeURL(target) {
    const u = new URL(target, globalThis.location?.href); // '/ws' is this page's node
    if (u.protocol === 'http:' || u.protocol === 'https:') u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    const storage = this.#o.storage;
    const claimed = storage === globalThis.localStorage ? await claimAttempt(storage, this.#o.storageKey) : nextAttempt(storage, this.#o.storageKey);
    this.#attempt = Math.min(Math.max(claimed, this.#attempt + 1), MAX_ATTEMPT); // growing in this client whatever the storage
    u.searchParams.set('attempt', String(this.#attempt));
    if (this.#o.platform) u.searchParams.set('platform', this.#o.platform);
    if (this.#activity) u.searchParams.set('activity', this.#activity);
    if (this.#o.deviceClass) u.searchParams.set('class', this.#o.deviceClass);
    u.searchParams.set('token', this.#o.token); // a browser cannot set Authorization
    return u.toString();
  }

  // one connection attempt: resolves {ws, hello} once hello came, or
  // {opened} (whether the handshake got its 101) when it failed
  async #dial(target) {
    this.#emit('state', { state: 'connecting', url: target });
    const url = await this.#handshakeURL(target);
    return new Promise((resolve) => {
      let ws, opened = false;
      try { ws = new this.#o.WebSocket(url, [SUBPROTOCOL]); } catch { resolve({ opened }); return; }
      const fail = () => {
        this.#t.clear(timer);
        ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
        ws.close();
        resolve({ opened });
      };
      const timer = this.#t.set(fail, this.#o.dialTimeoutMs);
      ws.onopen = () => { opened = true; };
      ws.onclose = fail;
      ws.onmessage = (m) => {
        let f;
        try { f = JSON.parse(m.data); } catch { fail(); return; }
        if (!f.hello) { fail(); return; }
        this.#t.clear(timer);
        ws.onopen = ws.onmessage = ws.onclose = null;
        resolve({ ws, hello: f.hello });
      };
    });
  }

  // runs fn every ms until the returned stop
  #every(ms, fn) {
    let id = 0, on = true;
    const tick = () => { if (!on) return; fn(); if (on) id = this.#t.set(tick, ms); };
    id = this.#t.set(tick, ms);
    return () => { on = false; this.#t.clear(id); };
  }

  // runs one connection until it ends: resolves {code, reason, healthy};
  // healthy: the node acked a heartbeat, or it lasted a heartbeat interval
  #serve({ ws, hello }, url) {
    this.#ws = ws; this.#hello = hello; this.#conns++;
    if (this.#lostAt) this.#gap = Date.now() - this.#lostAt;
    const interval = hello.heartbeat_interval_ms || 30000;
    const silence = this.#o.silenceMs || silenceLimit(interval);
    const start = Date.now();
    let heard = start, seq = 0, beat = 0, acked = false, sinceAsk = Infinity;
    return new Promise((resolve) => {
      const stops = [];
      const done = (code, reason) => {
        this.#t.clear(beat);
        for (const stop of stops) stop();
        ws.onmessage = ws.onclose = ws.onerror = null;
        if (ws.readyState <= 1) ws.close(code === 'silent' ? 4000 : 1000);
        this.#lost();
        this.#emit('state', { state: 'disconnected', url, node: hello.node, code, reason });
        this.#wake = null;
        resolve({ code, reason, healthy: acked || Date.now() - start >= interval });
      };
      this.#wake = () => done('stopped', '');
      ws.onclose = (e) => done(e.code, e.reason);
      ws.onmessage = (m) => {
        heard = Date.now();
        const ack = this.#frame(m.data)?.heartbeat_ack;
        if (!ack) return;
        acked = true;
        if (Number(ack.client_ts_ms) > 0) this.#rtt = Math.max(heard - Number(ack.client_ts_ms), 0);
      };
      // each heartbeat asks for an ack only as asksAck says
      const send = () => {
        const ack = asksAck(sinceAsk, Date.now() - heard, interval, silence);
        sinceAsk = ack ? 1 : sinceAsk + 1;
        this.#send({ heartbeat: { seq: String(++seq), client_ts_ms: String(Date.now()), ack } });
      };
      const tick = () => {
        beat = this.#t.set(() => { send(); tick(); }, heartbeatDelay(interval, this.#o.jitter, this.#o.random));
      };
      tick();
      stops.push(this.#every(Math.min(silence / 4, 1000), () => { if (Date.now() - heard > silence) done('silent', 'heard nothing'); }));
      const every = (hello.idle_after_ms || 0) / 2;
      if (every > 0) stops.push(this.#every(every, () => { if (this.#activity === 'active') this.#send({ set_activity: { activity: 'active' } }); }));
      this.#subscribeAll();
      this.#sendStatus();
      this.#emit('state', { state: 'connected', url, node: hello.node, attempt: this.#attempt, gapMs: this.#gap });
    });
  }

  // the connection ended: queries waiting fail, pulling stops
  #lost() {
    this.#ws = null; this.#hello = null; this.#lostAt = Date.now();
    for (const [id, q] of this.#queries) { this.#queries.delete(id); q.reject(new ClosedError('presence: the connection ended before the answer')); }
    this.#asked.clear();
    const targets = this.#stopPulling();
    if (targets.length) this.#emit('restored', { targets, ended: true });
  }

  // handles one frame and returns it (undefined: undecodable)
  #frame(data) {
    try {
      const f = JSON.parse(data);
      this.#handle(f);
      return f;
    } catch (err) {
      this.#emit('error', { error: err }); // an undecodable frame: a node of another version?
      return undefined;
    }
  }

  #handle(f) {
    if (f.snapshot) this.#snapshot(f.snapshot);
    else if (f.presence) this.#change(f.presence);
    else if (f.presence_batch) for (const p of f.presence_batch.presences ?? []) this.#change(p);
    else if (f.resync) this.#subscribeAll();
    else if (f.state_sync_request) {
      this.#send({ state_sync: { nonce: f.state_sync_request.nonce, activity: this.#activity || 'active' } });
    } else if (f.error) this.#error(f.error);
    else if (f.degraded) this.#degraded(f.degraded);
    else if (f.restored) this.#restored();
  }

  // degraded: pull the targets the node stopped pushing, a query of them
  // every retry_after_ms (at least 100 ms; chunks of MAX_TARGETS), each
  // answer taken as changes (the version rule holds), until restored or
  // the connection ends
  #degraded(d) {
    const pace = Math.max(Number(d.retry_after_ms ?? 0) || 0, 100), targets = d.targets ?? [];
    for (const t of targets) this.#pulling.add(t);
    if (!this.#stopPull) this.#stopPull = this.#pull(pace);
    this.#emit('degraded', { targets: [...targets], pulling: this.pulling(), retryAfterMs: pace });
  }

  // restored: the snapshot that follows (request id 'restored') replaces
  // the state of every degraded target, as a subscribe's snapshot does
  #restored() {
    const targets = this.#stopPulling();
    this.#asked.set('restored', targets);
    this.#emit('restored', { targets, ended: false });
  }

  // ends the pull loop: the targets that were pulled
  #stopPulling() {
    const targets = this.pulling();
    this.#stopPull?.();
    this.#stopPull = null;
    this.#pulling.clear();
    return targets;
  }

  // the pull loop: a query of the pulling targets every pace; a 429 waits
  // as long as the node says; other failures wait for the next round
  #pull(pace) {
    let timer = 0, over = false;
    const round = async () => {
      let wait = pace;
      for (const chunk of chunkTargets(this.pulling(), queryFrame)) {
        if (over) break;
        try {
          const ps = await this.query(chunk);
          if (over) return;
          for (const p of ps) this.#change(p);
        } catch (err) {
          if (err instanceof PresenceError && err.retryAfterMs > 0) wait = err.retryAfterMs;
          break;
        }
      }
      if (!over) timer = this.#t.set(round, wait);
    };
    timer = this.#t.set(round, pace);
    return () => { over = true; this.#t.clear(timer); };
  }

  // a snapshot replaces the state of its request's targets: one absent from it is not visible
  #snapshot(snap) {
    const id = snap.request_id ?? '', presences = snap.presences ?? [];
    const q = this.#queries.get(id);
    if (q) { this.#queries.delete(id); q.resolve(presences); return; }
    if (!this.#asked.has(id)) return; // an aborted query's late answer
    const targets = this.#asked.get(id);
    this.#asked.delete(id);
    for (const t of targets) this.#state.delete(t);
    for (const p of presences) if (this.#targets.has(p.user)) this.#state.set(p.user, p);
    this.#emit('snapshot', { requestId: id, targets, presences });
    for (const p of presences) this.#emit('presence', { presence: p, snapshot: true });
  }

  // a change is kept only if its version is greater than the kept one's
  #change(p) {
    if (!this.#targets.has(p.user)) return;
    const old = this.#state.get(p.user);
    if (old && compareVersions(p.version, old.version) <= 0) return;
    this.#state.set(p.user, p);
    this.#emit('presence', { presence: p, snapshot: false });
  }

  #error(e) {
    const err = new PresenceError(e.code ?? 0, e.message ?? '', e.retry_after_ms ?? 0, e.request_id ?? '');
    const q = this.#queries.get(err.requestId);
    if (q) { this.#queries.delete(err.requestId); q.reject(err); return; }
    if (err.requestId) this.#asked.delete(err.requestId);
    if (err.code === 429 && err.serverMessage.startsWith('set_activity')) {
      // the node kept the state from before: tell it the current one once it may pass
      const ws = this.#ws;
      this.#t.set(() => { if (this.#ws === ws && this.#activity) this.#send({ set_activity: { activity: this.#activity } }); }, err.retryAfterMs);
    }
    this.#emit('error', { error: err });
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      const t = this.#t.set(() => { this.#wake = null; resolve(); }, ms);
      this.#wake = () => { this.#t.clear(t); resolve(); };
    });
  }

  // ends the client once: a refresh that fails after stop() ends nothing more
  #finish(error) {
    if (this.#ended) return;
    this.#ended = true;
    this.#stopped = true;
    this.#unwatch?.(); this.#unwatch = null;
    const ws = this.#ws;
    this.#wake?.();
    if (ws && ws.readyState <= 1) ws.close(1000);
    this.#lost();
    this.#emit('closed', { error, code: error?.code ?? 0 });
  }

  // ---- declared activity: Page Visibility and input ----

  // hidden: background; visible with input: active; visible and no input
  // for inputIdleMs: idle. Only changes are sent (setActivity).
  #watchActivity() {
    const input = () => {
      this.#inputAt = Date.now();
      if (!document.hidden) this.#declare('active');
    };
    const visibility = () => {
      if (document.hidden) this.#declare('background');
      else input(); // coming back to the page counts as input
    };
    const kinds = ['pointerdown', 'pointermove', 'keydown', 'wheel', 'touchstart', 'scroll'];
    for (const k of kinds) window.addEventListener(k, input, { passive: true, capture: true });
    document.addEventListener('visibilitychange', visibility);
    this.#unwatch = () => {
      for (const k of kinds) window.removeEventListener(k, input, { capture: true });
      document.removeEventListener('visibilitychange', visibility);
      this.#t.clear(this.#idleTimer);
      this.#idleTimer = 0;
    };
    visibility();
  }

  #declare(activity) {
    if (activity === 'active' && !this.#idleTimer) this.#armIdle(this.#o.inputIdleMs);
    if (this.#activity !== activity) this.setActivity(activity);
  }

  // one timer, re-armed for what is left since the last input (not reset by
  // every pointermove): idle once inputIdleMs passed without input
  #armIdle(ms) {
    this.#idleTimer = this.#t.set(() => {
      this.#idleTimer = 0;
      if (document.hidden) return;
      const left = this.#o.inputIdleMs - (Date.now() - this.#inputAt);
      if (left > 0) this.#armIdle(left);
      else this.#declare('idle');
    }, ms);
  }
}
