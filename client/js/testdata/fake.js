// PresenceClient against a fake WebSocket the test drives, run in the
// browser by sdk_test.go: frames sent and kept, the close codes, failover
// the version rule and degraded mode. run() resolves with the failures (none: passed).
import * as m from '/presence.js';

class FakeWS {
  static all = [];
  constructor(url, protocols) {
    Object.assign(this, { url: new URL(url), protocols, sent: [], sentAt: [], readyState: 0, closedWith: 0 });
    FakeWS.all.push(this);
  }
  send(s) { this.sent.push(JSON.parse(s)); this.sentAt.push(performance.now()); }
  close(code = 1000) { if (this.readyState < 2) { this.readyState = 3; this.closedWith = code; } }
  // the node's side
  hello(node) {
    this.readyState = 1;
    this.frame({ hello: { conn_id: `${node}-1`, node, user: 'me', device: 'web', epoch: this.url.searchParams.get('attempt'), heartbeat_interval_ms: 50, stale_ms: 125, half_open_bound_ms: 300, idle_after_ms: 200 } });
  }
  frame(f) { this.onmessage?.({ data: JSON.stringify(f) }); }
  drop(code, reason = '') { this.readyState = 3; this.onclose?.({ code, reason }); }
  kinds(kind) { return this.sent.filter((f) => f[kind]).map((f) => f[kind]); }
  // when each frame of kind was sent (performance.now())
  times(kind) { return this.sentAt.filter((_, i) => this.sent[i][kind]); }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, cond, fails, ms = 2000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(5)) if (cond()) return true;
  fails.push(`timed out: ${what}`);
  return false;
}
const token = (exp) => btoa(`me\nweb\n${exp}`).replace(/=+$/, '') + '.sig';

export async function run() {
  const fails = [];
  const eq = (name, got, want) => {
    if (JSON.stringify(got) !== JSON.stringify(want)) fails.push(`${name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  };
  const ctx = { fails, eq, refreshes: 0, events: [] };
  // hello, and wait until the client serves the connection (a real
  // socket's events are tasks: none comes before the client is there)
  ctx.serve = async (w, node) => { w.hello(node); await until(`serving ${node}`, () => ctx.c.hello?.node === node, fails); };
  const c = ctx.c = new m.PresenceClient({
    urls: ['ws://a.test/ws', 'ws://b.test/ws'], token: token(4e9), refresh: async () => { ctx.refreshes++; return 'tok2'; },
    storageKey: 'fake.attempt', trackActivity: false, activity: 'active', backoffMinMs: 1, backoffMaxMs: 2, silenceMs: 400, WebSocket: FakeWS,
  });
  for (const k of ['presence', 'error', 'closed']) c.addEventListener(k, (e) => ctx.events.push([k, e.detail]));
  c.subscribe(['alice', 'bob']);
  c.subscribe(['carl'], { tier: 'batched' });
  c.start();
  await firstConnection(ctx);
  await requests(ctx);
  await closeCodes(ctx);
  await tokens(fails, eq);
  await activity(fails, eq);
  await restart(fails, eq);
  await dialTimeout(fails, eq);
  await degraded(fails, eq);
  return fails;
}

// the handshake, the subscribes, the version rule, heartbeats, the state sync, resync
async function firstConnection({ c, fails, eq, events }) {
  if (!await until('a first dial', () => FakeWS.all.length === 1, fails)) return;
  const w = FakeWS.all[0], p = w.url.searchParams;
  eq('handshake', [w.url.host, w.protocols, p.get('token'), p.get('platform'), p.get('activity'), Number(p.get('attempt')) > 1e12],
    ['a.test', ['presence.v1.json'], token(4e9), 'web', 'active', true]);
  w.hello('n1');
  const acks = setInterval(() => w.frame({ heartbeat_ack: {} }), 40);
  await until('connected', () => c.connected, fails);
  eq('connected', [c.connected, c.hello.node], [true, 'n1']);
  const subs = w.kinds('subscribe');
  eq('subscribed by tier', subs.map((s) => [s.targets, s.tier]), [[['alice', 'bob'], undefined], [['carl'], 'batched']]);
  w.frame({ snapshot: { request_id: subs[0].request_id, presences: [{ user: 'alice', status: 'online', version: '10' }] } });
  eq('snapshot kept', [c.state('alice')?.version, c.state('bob')], ['10', undefined]);
  for (const v of ['9', '10', '11', '18446744073709551615', '99']) w.frame({ presence: { user: 'alice', status: 'offline', version: v } });
  eq('only greater versions kept', events.filter(([k, d]) => k === 'presence' && !d.snapshot).map(([, d]) => d.presence.version), ['11', '18446744073709551615']);
  w.frame({ presence_batch: { presences: [{ user: 'carl', status: 'online', version: '5' }, { user: 'zed', status: 'online', version: '1' }] } });
  eq('a batch is changes, of subscribed targets', [c.state('carl')?.version, c.state('zed')], ['5', undefined]);
  await until('two heartbeats', () => w.kinds('heartbeat').length >= 2, fails);
  eq('heartbeat seqs', w.kinds('heartbeat').slice(0, 2).map((h) => h.seq), ['1', '2']);
  await until('active renewed at half of idle_after', () => w.kinds('set_activity').length >= 1, fails);
  w.frame({ state_sync_request: { nonce: 'n0nce' } });
  eq('state sync answered', w.kinds('state_sync'), [{ nonce: 'n0nce', activity: 'active' }]);
  w.frame({ resync: { reason: 'view moved' } });
  const again = w.kinds('subscribe').slice(2);
  eq('resubscribed after resync', again.map((s) => s.targets), [['alice', 'bob'], ['carl']]);
  w.frame({ snapshot: { request_id: again[0].request_id, presences: [{ user: 'bob', status: 'online', version: '3' }] } });
  eq('the snapshot replaces its targets', [c.state('alice'), c.state('bob')?.version, c.state('carl')?.version], [undefined, '3', '5']);
  clearInterval(acks);
}

// queries, error frames, activity and status
async function requests({ c, fails, eq, events }) {
  const w = FakeWS.all[0];
  const refused = c.query(['alice']);
  const q1 = w.kinds('query').at(-1);
  w.frame({ error: { code: 429, message: 'query: more than 1 a second', request_id: q1.request_id, retry_after_ms: 187 } });
  await refused.then(() => fails.push('query: not rejected'), (e) => eq('query refused', [e instanceof m.PresenceError, e.code, e.retryAfterMs], [true, 429, 187]));
  const answered = c.query(['alice', 'dave']);
  const q2 = w.kinds('query').at(-1);
  w.frame({ snapshot: { request_id: q2.request_id, presences: [{ user: 'dave', status: 'offline', version: '7' }] } });
  eq('query answered, state unchanged', [(await answered).map((p) => p.user), c.state('dave')], [['dave'], undefined]);
  w.frame({ error: { code: 400, message: 'set_status: show must be available' } });
  const err = events.filter(([k]) => k === 'error').at(-1)?.[1].error;
  eq('an error frame as a typed error', [err instanceof m.PresenceError, err?.code, err?.serverMessage], [true, 400, 'set_status: show must be available']);
  const before = w.kinds('set_activity').length;
  c.setActivity('idle');
  c.setActivity('idle');
  eq('activity sent once', w.kinds('set_activity').slice(before), [{ activity: 'idle' }]);
  c.setStatus({ show: 'dnd', text: 'in a meeting' });
  eq('status sent', w.kinds('set_status'), [{ show: 'dnd', text: 'in a meeting' }]);
  c.unsubscribe(['bob']);
  eq('unsubscribed, state forgotten', [w.kinds('unsubscribe'), c.state('bob')], [[{ targets: ['bob'] }], undefined]);
}

// each close code: where the client goes next, and with what
async function closeCodes(ctx) {
  const { c, fails, eq, events } = ctx;
  const step = async (what, n) => until(what, () => FakeWS.all.length === n, fails);
  const w1 = FakeWS.all[0];
  w1.drop(1001, 'draining');
  if (!await step('a dial after 1001', 2)) return;
  const w2 = FakeWS.all[1];
  eq('1001: the next URL, a greater attempt, the activity', [w2.url.host, Number(w2.url.searchParams.get('attempt')) > Number(w1.url.searchParams.get('attempt')), w2.url.searchParams.get('activity')], ['b.test', true, 'idle']);
  w2.hello('n2');
  await until('connected to n2', () => c.hello?.node === 'n2', fails);
  eq('resubscribed and status told again', [w2.kinds('subscribe').length, w2.kinds('set_status').length], [2, 1]);
  if (!await step('a dial after silence', 3)) return; // silenceMs 400: nothing heard
  const w3 = FakeWS.all[2];
  eq('silence: dropped for the next URL', [w2.closedWith, w3.url.host], [4000, 'a.test']);
  await ctx.serve(w3, 'n3');
  w3.drop(4401, 'token expired');
  if (!await step('a dial after 4401', 4)) return;
  eq('4401: refreshed, the same URL', [ctx.refreshes, FakeWS.all[3].url.searchParams.get('token'), FakeWS.all[3].url.host], [1, 'tok2', 'a.test']);
  await ctx.serve(FakeWS.all[3], 'n4');
  FakeWS.all[3].drop(4008, 'outbox overflow');
  if (!await step('a dial after 4008', 5)) return;
  eq('4008: the same URL', FakeWS.all[4].url.host, 'a.test');
  await ctx.serve(FakeWS.all[4], 'n5');
  FakeWS.all[4].drop(1006);
  if (!await step('a dial after a cut', 6)) return;
  eq('cut: the next URL', FakeWS.all[5].url.host, 'b.test');
  FakeWS.all[5].drop(1006); // refused before hello
  if (!await step('a dial after a failed one', 7)) return;
  eq('failed dial: the next URL', FakeWS.all[6].url.host, 'a.test');
  await ctx.serve(FakeWS.all[6], 'n7');
  FakeWS.all[6].drop(4001, 'superseded');
  await sleep(50);
  const closed = events.filter(([k]) => k === 'closed');
  eq('4001: ended, no dial', [FakeWS.all.length, closed.length, closed[0]?.[1].code, closed[0]?.[1].error instanceof m.ClosedError], [7, 1, 4001, true]);
}

// 4401 without refresh ends; a token past its expiry is refreshed before dialing
async function tokens(fails, eq) {
  const n = FakeWS.all.length;
  let ended;
  const c = new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(4e9), trackActivity: false, storage: null, WebSocket: FakeWS });
  c.addEventListener('closed', (e) => { ended = e.detail; });
  c.start();
  if (!await until('a dial', () => FakeWS.all.length === n + 1, fails)) return;
  FakeWS.all[n].hello('n9');
  await until('serving n9', () => c.hello?.node === 'n9', fails);
  FakeWS.all[n].drop(4401);
  await until('ended after 4401', () => ended, fails);
  eq('4401 without refresh', [ended?.code, /no refresh/.test(ended?.error?.message)], [4401, true]);
  const fresh = new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(1), refresh: () => 'tok3', trackActivity: false, storage: null, WebSocket: FakeWS });
  fresh.start();
  if (!await until('a dial with a fresh token', () => FakeWS.all.length === n + 2, fails)) return;
  eq('an expired token refreshed before the dial', FakeWS.all[n + 1].url.searchParams.get('token'), 'tok3');
  fresh.stop();
}

// activity from the page: visible with input active, no input for
// inputIdleMs idle, hidden background; only changes sent; a set_activity
// refused for its rate (429) sent again after retry_after_ms
async function activity(fails, eq) {
  const n = FakeWS.all.length;
  const c = new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(4e9), inputIdleMs: 150, storage: null, WebSocket: FakeWS });
  c.start();
  if (!await until('a dial', () => FakeWS.all.length === n + 1, fails)) return;
  const w = FakeWS.all[n];
  eq('a visible page connects active', [document.hidden, w.url.searchParams.get('activity')], [false, 'active']);
  w.hello('n1');
  await until('serving', () => c.connected, fails);
  const acks = setInterval(() => w.frame({ heartbeat_ack: {} }), 40);
  // the changes sent: renewals of active (every half of idle_after_ms)
  // folded, and none before the first change (the handshake said active)
  const sent = () => w.kinds('set_activity').map((a) => a.activity)
    .filter((a, i, all) => a !== (all[i - 1] ?? 'active'));
  await until('idle without input', () => c.activity === 'idle', fails);
  window.dispatchEvent(new KeyboardEvent('keydown', { key: 'a' }));
  eq('input: active at once', c.activity, 'active');
  Object.defineProperty(document, 'hidden', { get: () => true, configurable: true });
  document.dispatchEvent(new Event('visibilitychange'));
  eq('hidden: background', c.activity, 'background');
  window.dispatchEvent(new KeyboardEvent('keydown', { key: 'b' })); // input of a hidden page: still background
  delete document.hidden;
  document.dispatchEvent(new Event('visibilitychange'));
  eq('visible again: active', c.activity, 'active');
  eq('changes sent, each once', sent(), ['idle', 'active', 'background', 'active']);
  w.frame({ error: { code: 429, message: 'set_activity: more than 1 a second', retry_after_ms: 30 } });
  const before = w.kinds('set_activity').length;
  await until('told again after retry_after_ms', () => w.kinds('set_activity').length > before, fails);
  eq('the current activity', w.kinds('set_activity').at(-1), { activity: 'active' });
  clearInterval(acks);
  c.stop();
}

// stop() then start() while the first dial is pending: one loop serves,
// the stopped one's late connection is closed, closed fires once a stop
async function restart(fails, eq) {
  const n = FakeWS.all.length;
  let closed = 0;
  const c = new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(4e9), trackActivity: false, storage: null, WebSocket: FakeWS });
  c.addEventListener('closed', () => closed++);
  c.start();
  if (!await until('a dial', () => FakeWS.all.length === n + 1, fails)) return;
  c.stop();
  c.start();
  if (!await until('a dial after the restart', () => FakeWS.all.length === n + 2, fails)) return;
  FakeWS.all[n].hello('old');
  FakeWS.all[n + 1].hello('new');
  await until('serving the new one', () => c.hello?.node === 'new', fails);
  await sleep(30);
  eq('one loop after stop and start', [FakeWS.all.length, FakeWS.all[n].closedWith, closed, c.hello?.node], [n + 2, 1000, 1, 'new']);
  c.stop();
  eq('closed once per stop', closed, 2);
}

// a node that never answers the handshake: given up after dialTimeoutMs,
// the next URL tried; a query while not connected is refused at once
async function dialTimeout(fails, eq) {
  const n = FakeWS.all.length;
  const c = new m.PresenceClient({ urls: ['ws://a.test/ws', '/ws'], token: token(4e9), trackActivity: false, storage: null,
    dialTimeoutMs: 60, backoffMinMs: 1, WebSocket: FakeWS });
  await c.query(['a']).then(() => fails.push('query while not connected: answered'),
    (e) => eq('query while not connected', e instanceof m.ClosedError, true));
  const start = Date.now();
  c.start();
  if (!await until('a second dial after the timeout', () => FakeWS.all.length === n + 2, fails)) return;
  eq('given up after dialTimeoutMs, the next URL (a path: this page\'s node)', [Date.now() - start >= 60, FakeWS.all[n].closedWith, FakeWS.all[n + 1].url.href],
    [true, 1000, `ws://${location.host}/ws?${FakeWS.all[n + 1].url.searchParams}`]);
  await c.stop();
}

// degraded mode: the targets of a degraded frame pulled with queries at
// its pace, the answers taken as changes (the version rule holds), a 429
// waited out; restored and its snapshot replace exactly the pulled
// targets and stop the queries; a connection's end stops them too
async function degraded(fails, eq) {
  const n = FakeWS.all.length, events = [];
  const c = new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(4e9), trackActivity: false, storage: null,
    backoffMinMs: 1, backoffMaxMs: 2, WebSocket: FakeWS });
  for (const k of ['presence', 'degraded', 'restored', 'error']) c.addEventListener(k, (e) => events.push([k, e.detail]));
  c.subscribe(['alice']);
  c.subscribe(['frank', 'gina', 'hank'], { tier: 'batched' });
  c.start();
  if (!await until('a dial', () => FakeWS.all.length === n + 1, fails)) return;
  const w = FakeWS.all[n];
  w.hello('d1');
  if (!await until('serving', () => c.connected, fails)) return;
  const acks = setInterval(() => w.frame({ heartbeat_ack: {} }), 40);
  try {
    const subs = w.kinds('subscribe');
    w.frame({ snapshot: { request_id: subs[0].request_id, presences: [{ user: 'alice', status: 'online', version: '3' }] } });
    w.frame({ snapshot: { request_id: subs[1].request_id, presences: [
      { user: 'frank', status: 'online', version: '5' }, { user: 'hank', status: 'online', version: '1' }] } });
    eq('nothing pulled before degraded', c.pulling(), []);
    const t0 = performance.now();
    w.frame({ degraded: { retry_after_ms: 120, targets: ['gina', 'frank'] } });
    eq('pulling, in order', c.pulling(), ['frank', 'gina']);
    eq('the degraded event', events.filter(([k]) => k === 'degraded').map(([, d]) => d), [{ targets: ['gina', 'frank'], pulling: ['frank', 'gina'], retryAfterMs: 120 }]);
    if (!await until('a first pull', () => w.kinds('query').length === 1, fails)) return;
    const q1 = w.kinds('query')[0];
    eq('the pulled targets, at the pace', [q1.targets, w.times('query')[0] - t0 >= 119], [['frank', 'gina'], true]);
    const changes = () => events.filter(([k, d]) => k === 'presence' && !d.snapshot).map(([, d]) => [d.presence.user, d.presence.version]);
    w.frame({ snapshot: { request_id: q1.request_id, presences: [
      { user: 'frank', status: 'offline', version: '4' }, { user: 'gina', status: 'online', version: '2' }] } });
    await until('the answer taken', () => c.state('gina'), fails);
    eq('an answer as changes, an older version ignored', [c.state('frank')?.version, c.state('gina')?.version, changes()], ['5', '2', [['gina', '2']]]);
    if (!await until('a second pull', () => w.kinds('query').length === 2, fails)) return;
    const [a1, a2] = w.times('query');
    eq('the next pull a pace later', a2 - a1 >= 119, true);
    const q2 = w.kinds('query')[1];
    w.frame({ error: { code: 429, message: 'query: more than 1 a second', request_id: q2.request_id, retry_after_ms: 300 } });
    const refusedAt = performance.now();
    if (!await until('a pull after the 429', () => w.kinds('query').length === 3, fails)) return;
    eq('a 429 waited out, no error event', [w.times('query')[2] - refusedAt >= 299, events.filter(([k]) => k === 'error').length], [true, 0]);
    const q3 = w.kinds('query')[2];
    w.frame({ snapshot: { request_id: q3.request_id, presences: [{ user: 'frank', status: 'offline', version: '6' }] } });
    await until('a newer version taken', () => c.state('frank')?.version === '6', fails);
    eq('a newer version as a change', changes(), [['gina', '2'], ['frank', '6']]);
    w.frame({ restored: {} });
    eq('restored: nothing pulled', c.pulling(), []);
    eq('the restored event', events.filter(([k]) => k === 'restored').map(([, d]) => d), [{ targets: ['frank', 'gina'], ended: false }]);
    w.frame({ snapshot: { request_id: 'restored', presences: [{ user: 'frank', status: 'online', version: '7' }] } });
    eq('the restored snapshot replaces the pulled targets',
      [c.state('frank')?.version, c.state('gina'), c.state('hank')?.version, c.state('alice')?.version], ['7', undefined, '1', '3']);
    const pulls = w.kinds('query').length;
    await sleep(300); // more than two paces
    eq('no pull after restored', w.kinds('query').length, pulls);
    w.frame({ degraded: { retry_after_ms: 0, targets: ['hank'] } });
    eq('degraded again', c.pulling(), ['hank']);
    if (!await until('a pull at the least pace', () => w.kinds('query').length === pulls + 1, fails)) return;
    eq('hank pulled', w.kinds('query').at(-1).targets, ['hank']);
    await sleep(250); // the pull waits for its answer: one loop sends no other
    eq('one pull loop: one query waiting', w.kinds('query').length, pulls + 1);
    clearInterval(acks);
    w.drop(1006);
    eq('the connection ended: nothing pulled', [c.pulling(), events.filter(([k]) => k === 'restored').at(-1)?.[1]], [[], { targets: ['hank'], ended: true }]);
    const after = w.kinds('query').length;
    await sleep(300);
    eq('no pull after the connection ended', w.kinds('query').length, after);
    eq('no query on the next connection', FakeWS.all.slice(n + 1).flatMap((x) => x.kinds('query')), []);
  } finally {
    clearInterval(acks);
    c.stop();
  }
}
