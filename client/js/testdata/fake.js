// PresenceClient against a fake WebSocket the test drives, run in the
// browser by sdk_test.go: frames sent and kept, the close codes, failover
// the version rule and degraded mode. run() resolves with the failures (none: passed).
import * as m from '/presence.js';

class FakeWS {
  static all = [];
  constructor(url, protocols) {
    Object.assign(this, { url: new URL(url), protocols, sent: [], sentAt: [], bytes: [], readyState: 0, closedWith: 0, at: performance.now() });
    FakeWS.all.push(this);
  }
  send(s) { this.sent.push(JSON.parse(s)); this.sentAt.push(performance.now()); this.bytes.push(new TextEncoder().encode(s).length); }
  close(code = 1000) { if (this.readyState < 2) { this.readyState = 3; this.closedWith = code; } }
  // the node's side
  hello(node, extra = {}) {
    this.readyState = 1;
    this.onopen?.();
    this.frame({ hello: { conn_id: `${node}-1`, node, user: 'me', device: 'web', epoch: this.url.searchParams.get('attempt'), heartbeat_interval_ms: 50, stale_ms: 125, half_open_bound_ms: 300, idle_after_ms: 200, ...extra } });
  }
  frame(f) { this.onmessage?.({ data: JSON.stringify(f) }); }
  // the handshake's 101 and nothing after it
  open() { this.readyState = 1; this.onopen?.(); }
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
  await reauthenticate(fails, eq);
  await clientBugs(fails, eq);
  await overflow(fails, eq);
  await battery(fails, eq);
  await heartbeats(fails, eq);
  await ackAsks(fails, eq);
  await abortQuery(fails, eq);
  await refusedDials(fails, eq);
  await tooLarge(fails, eq);
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

// a client of the fake on a.test, each test's own
const client = (o = {}) => new m.PresenceClient({ urls: ['ws://a.test/ws'], token: token(4e9), trackActivity: false, storage: null, WebSocket: FakeWS, ...o });
const dialed = (n, fails, what = `dial ${n}`, ms = 2000) => until(what, () => FakeWS.all.length >= n, fails, ms);

// 4409 (the state sync failed): the refresh callback's token, then the same URL
async function reauthenticate(fails, eq) {
  const n = FakeWS.all.length;
  let refreshes = 0;
  const c = client({ urls: ['ws://a.test/ws', 'ws://b.test/ws'], refresh: async () => { refreshes++; return 'tok-4409'; } });
  c.start();
  if (!await dialed(n + 1, fails)) return;
  FakeWS.all[n].hello('r1');
  await until('serving r1', () => c.connected, fails);
  FakeWS.all[n].drop(4409, 'state sync failed');
  if (!await dialed(n + 2, fails, 'a dial after 4409')) return;
  const w = FakeWS.all[n + 1];
  eq('4409: refreshed, then the same URL with the new token', [refreshes, w.url.host, w.url.searchParams.get('token')], [1, 'a.test', 'tok-4409']);
  c.stop();
}

// 1002, 1003, 1007, 1009 (a client bug): the same URL after a drawn wait;
// the back-off doubles while the connections are closed at once, and
// starts again after one that proved healthy (a heartbeat acked)
async function clientBugs(fails, eq) {
  const n = FakeWS.all.length, min = 40;
  const c = client({ backoffMinMs: min, backoffMaxMs: 5000, random: () => 0.999 });
  c.start();
  const quick = { heartbeat_interval_ms: 5000 }; // not healthy by its length
  const waits = [];
  for (const [i, code] of [1002, 1003, 1007, 1009].entries()) {
    if (!await dialed(n + i + 1, fails)) return;
    const w = FakeWS.all[n + i];
    w.hello(`b${i}`, quick);
    await until(`serving b${i}`, () => c.hello?.node === `b${i}`, fails);
    w.drop(code, 'a client bug');
    const dropped = performance.now();
    if (!await dialed(n + i + 2, fails, `a dial after ${code}`)) return;
    waits.push(FakeWS.all[n + i + 1].at - dropped);
    eq(`${code}: the same URL`, FakeWS.all[n + i + 1].url.host, 'a.test');
  }
  const want = [1, 2, 4, 8].map((k) => 0.999 * min * k - 2);
  eq('waits doubling while no connection is healthy', waits.map((d, i) => d >= want[i] && d < want[i] + 150), [true, true, true, true]);
  const w = FakeWS.all[n + 4];
  w.hello('healthy', { heartbeat_interval_ms: 30 });
  await until('a heartbeat', () => w.kinds('heartbeat').length >= 1, fails);
  w.frame({ heartbeat_ack: { seq: '1' } });
  w.drop(1002);
  const dropped = performance.now();
  if (!await dialed(n + 6, fails, 'a dial after a healthy connection')) return;
  const wait = FakeWS.all[n + 5].at - dropped;
  eq('the back-off starts again after a healthy connection', [wait >= 0.999 * min - 2, wait < 2 * min], [true, true]);
  c.stop();
}

// 4008: the same URL at once, every target subscribed again, and the new
// snapshot replaces the state whatever its version (a target absent
// from it is forgotten); changes after it follow the version rule
async function overflow(fails, eq) {
  const n = FakeWS.all.length;
  const c = client();
  c.subscribe(['alice', 'bob']);
  c.start();
  if (!await dialed(n + 1, fails)) return;
  const w1 = FakeWS.all[n];
  w1.hello('o1');
  await until('serving o1', () => c.connected, fails);
  w1.frame({ snapshot: { request_id: w1.kinds('subscribe')[0].request_id, presences: [
    { user: 'alice', status: 'online', version: '10' }, { user: 'bob', status: 'online', version: '5' }] } });
  w1.drop(4008, 'outbox overflow');
  if (!await dialed(n + 2, fails, 'a dial after 4008')) return;
  const w2 = FakeWS.all[n + 1];
  eq('4008: at once, the same URL', [w2.at - w1.at < 500, w2.url.host], [true, 'a.test']);
  w2.hello('o2');
  await until('serving o2', () => c.hello?.node === 'o2', fails);
  const subs = w2.kinds('subscribe');
  eq('4008: subscribed again on the new connection', subs.map((x) => x.targets), [['alice', 'bob']]);
  w2.frame({ snapshot: { request_id: subs[0].request_id, presences: [{ user: 'alice', status: 'offline', version: '3' }] } });
  eq('the snapshot replaced the state', [c.state('alice')?.version, c.state('alice')?.status, c.state('bob')], ['3', 'offline', undefined]);
  w2.frame({ presence: { user: 'alice', status: 'online', version: '2' } });
  w2.frame({ presence: { user: 'alice', status: 'online', version: '4' } });
  eq('then the version rule', c.state('alice')?.version, '4');
  c.stop();
}

// deviceClass battery: ?class=battery, heartbeats at the hello's (longer) interval
async function battery(fails, eq) {
  const n = FakeWS.all.length;
  const c = client({ deviceClass: 'battery', random: () => 0, silenceMs: 60000 });
  c.start();
  if (!await dialed(n + 1, fails)) return;
  const w = FakeWS.all[n];
  eq('battery at the handshake', w.url.searchParams.get('class'), 'battery');
  w.hello('bat', { heartbeat_class: 'battery', heartbeat_interval_ms: 200, stale_ms: 500 });
  const t0 = performance.now();
  await until('two heartbeats', () => w.kinds('heartbeat').length >= 2, fails);
  const [a, b] = w.times('heartbeat');
  eq('at the battery interval', [a - t0 >= 199, b - a >= 199, b - a < 400], [true, true, true]);
  c.stop();
}

// heartbeats at the hello's interval shortened by the drawn jitter: with
// a draw of 0.5 and a jitter of 0.1, 95% of it every time; with the
// default random, in [90%, 100%] of it (real timers: late by at most the
// slack on a loaded machine, never early)
async function heartbeats(fails, eq) {
  for (const [name, random] of [['a fixed draw', () => 0.5], ['random draws', Math.random]]) {
    const n = FakeWS.all.length;
    const c = client({ random, silenceMs: 60000 });
    c.start();
    if (!await dialed(n + 1, fails)) return;
    const w = FakeWS.all[n];
    w.hello('hb', { heartbeat_interval_ms: 100 });
    const t0 = performance.now();
    await until('eight heartbeats', () => w.kinds('heartbeat').length >= 8, fails, 4000);
    c.stop();
    const at = [t0, ...w.times('heartbeat')], gaps = at.slice(1).map((t, i) => t - at[i]);
    const lo = name === 'a fixed draw' ? 95 : 90, sorted = [...gaps].sort((x, y) => x - y);
    if (!(sorted[0] >= lo - 1 && sorted[Math.floor(gaps.length / 2)] <= 100 + 30 && sorted.at(-1) <= 100 + 150)) {
      fails.push(`heartbeats with ${name}: gaps ${gaps.map(Math.round)} ms, want at least ${lo} and about ${lo} to 100`);
    }
    eq(`heartbeat seqs with ${name}`, w.kinds('heartbeat').map((h) => h.seq).slice(0, 8), ['1', '2', '3', '4', '5', '6', '7', '8']);
  }
}

// heartbeats ask for an ack sparsely (docs/protocol.md, "Acks on request"),
// against a node that acks only those that ask, 30 ms later: idle, the
// first asks and never two in a row go without (the one after an
// unanswered heartbeat heard nothing for over an interval: real timers
// are never early), and the rest asks for none while timers keep time;
// hearing a frame every 50 ms, only every tenth asks; each ack an RTT
// sample; the connection never taken for silent
async function ackAsks(fails, eq) {
  for (const busy of [false, true]) {
    const n = FakeWS.all.length;
    const c = client({ random: () => 0.9 });
    c.start();
    if (!await dialed(n + 1, fails)) return;
    const w = FakeWS.all[n];
    w.hello('acks', { heartbeat_interval_ms: busy ? 100 : 400 });
    let answered = 0;
    const node = setInterval(() => {
      for (const h of w.kinds('heartbeat').slice(answered)) {
        if (h.ack !== false) setTimeout(() => w.frame({ heartbeat_ack: { seq: h.seq, client_ts_ms: h.client_ts_ms } }), 30);
      }
      answered = w.kinds('heartbeat').length;
      if (busy) w.frame({ presence: { user: 'dave', status: 'online', version: String(Date.now()) } });
    }, busy ? 50 : 5);
    await until('eleven heartbeats', () => w.kinds('heartbeat').length >= 11, fails, 8000);
    clearInterval(node);
    const asks = w.kinds('heartbeat').slice(0, 11).map((h) => (h.ack === true ? 'a' : h.ack === false ? '-' : '?')).join('');
    if (busy) {
      eq('acks asked while hearing frames', asks, 'a---------a');
    } else if (!asks.startsWith('a') || asks.includes('--') || asks.includes('?') || (asks.match(/-/g) || []).length < 3) {
      fails.push(`acks asked while idle: ${asks}, want the first, then about every other one, never two in a row without`);
    }
    if (!(c.rttMs >= 30 && c.rttMs < 1000)) fails.push(`rttMs ${c.rttMs}, want the node's 30 ms or a little more`);
    eq(`one connection (busy ${busy})`, c.connections, 1);
    c.stop();
  }
}

// a query aborted with an AbortSignal: rejected with its reason, its late
// answer dropped; a signal aborted already: refused at once, nothing sent
async function abortQuery(fails, eq) {
  const n = FakeWS.all.length, events = [];
  const c = client();
  c.subscribe(['alice']);
  c.addEventListener('presence', (e) => events.push(e.detail.presence.user));
  c.start();
  if (!await dialed(n + 1, fails)) return;
  const w = FakeWS.all[n];
  w.hello('q');
  await until('serving q', () => c.connected, fails);
  const ac = new AbortController();
  const asked = c.query(['dave'], { signal: ac.signal });
  const q = w.kinds('query').at(-1);
  const reason = new Error('the page moved on');
  ac.abort(reason);
  await asked.then(() => fails.push('aborted query: resolved'), (e) => eq('aborted: rejected with the reason', e, reason));
  w.frame({ snapshot: { request_id: q.request_id, presences: [{ user: 'dave', status: 'online', version: '1' }] } });
  eq('its late answer dropped', [events, c.state('dave')], [[], undefined]);
  const sent = w.kinds('query').length;
  await c.query(['dave'], { signal: AbortSignal.abort(reason) }).then(() => fails.push('query with an aborted signal: resolved'),
    (e) => eq('an aborted signal: rejected at once', e, reason));
  eq('nothing sent for it', w.kinds('query').length, sent);
  const ac2 = new AbortController(), answered = c.query(['dave'], { signal: ac2.signal });
  w.frame({ snapshot: { request_id: w.kinds('query').at(-1).request_id, presences: [] } });
  eq('answered before the abort', await answered, []);
  ac2.abort(); // nothing left to reject
  c.stop();
}

// refused handshakes (a browser sees none of their statuses): after
// refusedLimit dials in a row that never opened, refresh gives a new token
// and the dials go on; with no refresh, or the same token, the client ends
// with a RefusedError; a dial that opened (and failed later) starts the
// count again
async function refusedDials(fails, eq) {
  const refuse = async (n, k) => {
    for (let i = 0; i < k; i++) {
      if (!await dialed(n + i + 1, fails, `refused dial ${i + 1}`)) return false;
      FakeWS.all[n + i].drop(1006);
    }
    return true;
  };
  const ends = (c) => Promise.race([new Promise((resolve) => c.addEventListener('closed', (e) => resolve(e.detail), { once: true })),
    sleep(3000).then(() => ({ error: 'not ended' }))]);
  let n = FakeWS.all.length;
  const alone = client({ refusedLimit: 3, backoffMinMs: 1, backoffMaxMs: 2 });
  const ended = ends(alone);
  alone.start();
  await refuse(n, 3);
  const e1 = await ended;
  await sleep(30);
  eq('no refresh: ended after 3', [e1.error instanceof m.RefusedError, e1.error?.dials, e1.code, FakeWS.all.length - n], [true, 3, 0, 3]);
  if (!/3 dials in a row never opened/.test(e1.error?.message)) fails.push(`RefusedError message: ${e1.error?.message}`);

  n = FakeWS.all.length;
  let refreshes = 0;
  const renewed = client({ refusedLimit: 3, backoffMinMs: 1, backoffMaxMs: 2, refresh: () => `tok-${++refreshes}` });
  renewed.start();
  await refuse(n, 3);
  if (!await dialed(n + 4, fails, 'a dial with the refreshed token')) return;
  eq('a new token: refreshed once, dials go on with it', [refreshes, FakeWS.all[n + 3].url.searchParams.get('token')], [1, 'tok-1']);
  FakeWS.all[n + 3].open(); // opened: a refusal after the handshake is not one
  FakeWS.all[n + 3].drop(1006);
  await refuse(n + 4, 2);
  if (!await dialed(n + 7, fails, 'a dial after an opened one')) return;
  eq('an opened dial starts the count again', refreshes, 1);
  renewed.stop();

  n = FakeWS.all.length;
  const same = client({ refusedLimit: 2, backoffMinMs: 1, backoffMaxMs: 2, refresh: () => token(4e9) });
  const ended3 = ends(same);
  same.start();
  await refuse(n, 2);
  const e3 = await ended3;
  eq('the same token again: ended', [e3.error instanceof m.RefusedError, /refresh gave no other token/.test(e3.error?.message), FakeWS.all.length - n], [true, true, 2]);
}

// a frame over MAX_MESSAGE bytes is refused before it is sent (the node
// would close the connection with 1009); subscriptions of several calls
// that no frame could hold together go again in frames that fit
async function tooLarge(fails, eq) {
  const n = FakeWS.all.length;
  const c = client();
  const ids = (p, k) => Array.from({ length: k }, (_, i) => `${p}${String(i).padStart(4, '0')}`.padEnd(128, 'x'));
  for (const [op, f] of [['subscribe', () => c.subscribe(ids('a', 1000))], ['unsubscribe', () => c.unsubscribe(ids('a', 1000))]]) {
    try { f(); fails.push(`${op} of 1000 ids of 128 characters: not refused`); } catch (e) {
      if (!(e instanceof m.InputError) || !/at most 65536 bytes/.test(e.message)) fails.push(`${op}: ${e.name}: ${e.message}`);
    }
  }
  c.subscribe(ids('b', 400));
  c.subscribe(ids('c', 400), { tier: 'batched' });
  c.subscribe(ids('d', 400), { tier: 'batched' });
  c.start();
  if (!await dialed(n + 1, fails)) return;
  const w = FakeWS.all[n];
  w.hello('big');
  await until('serving big', () => c.connected, fails);
  try { await c.query(ids('a', 1000)); fails.push('query of 1000 ids of 128 characters: not refused'); } catch (e) {
    if (!(e instanceof m.InputError) || !/query: the frame would be \d+ bytes: a message is at most 65536/.test(e.message)) fails.push(`query: ${e.message}`);
  }
  const subs = w.kinds('subscribe');
  eq('every target subscribed, by tier', [subs.filter((x) => !x.tier).flatMap((x) => x.targets).length, subs.filter((x) => x.tier).flatMap((x) => x.targets).length], [400, 800]);
  eq('in frames that fit', [subs.length, Math.max(...w.bytes) <= m.MAX_MESSAGE, w.kinds('query').length], [3, true, 0]);
  c.stop();
}
