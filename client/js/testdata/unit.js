// The pure parts of presence.js, run in the browser by sdk_test.go:
// run() resolves with the failures, one line each (none: passed).
import * as m from '/presence.js';

export async function run() {
  const fails = [];
  const eq = (name, got, want) => {
    if (JSON.stringify(got) !== JSON.stringify(want)) fails.push(`${name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  };
  const refuses = (name, f, rule) => {
    try { f(); fails.push(`${name}: not refused`); } catch (e) {
      if (!(e instanceof m.InputError) || !rule.test(e.message)) fails.push(`${name}: ${e.name}: ${e.message}, want ${rule}`);
    }
  };
  const accepts = (name, f) => { try { f(); } catch (e) { fails.push(`${name}: ${e.message}`); } };
  versions(eq);
  backoff(eq, fails);
  attempts(eq, fails);
  await claims(eq, fails);
  validation(refuses, accepts);
  frames(eq, refuses, accepts);
  eq('token expiry', m.tokenExpiryMs(btoa('alice\nphone\n1795948984').replace(/=+$/, '') + '.sig'), 1795948984000);
  eq('not a token', m.tokenExpiryMs('opaque'), null);
  return fails;
}

function versions(eq) {
  eq('uint64 max', m.compareVersions('18446744073709551615', '18446744073709551614'), 1);
  eq('by value, not as text', m.compareVersions('9', '10'), -1);
  eq('equal', m.compareVersions('1795947510942', '1795947510942'), 0);
  eq('beyond 2^53', m.compareVersions('9007199254740993', '9007199254740992'), 1); // equal as Numbers
  eq('absent is 0', m.compareVersions(undefined, '0'), 0);
  eq('absent below any', m.compareVersions(undefined, '1'), -1);
}

function backoff(eq, fails) {
  const bounds = [];
  for (let b = 100, i = 0; i < 12; i++, b = m.nextBackoff(b, 30000)) bounds.push(b);
  eq('backoff doubles to its cap', bounds, [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]);
  let lo = Infinity, hi = -Infinity;
  for (let i = 0; i < 2000; i++) {
    const d = m.drawBackoff(400);
    lo = Math.min(lo, d); hi = Math.max(hi, d);
  }
  if (!(lo >= 0 && lo < 40 && hi < 400 && hi > 360)) fails.push(`full jitter: draws in [${lo}, ${hi}], want spread over [0, 400)`);
  eq('draw at the edges', [m.drawBackoff(400, () => 0), m.drawBackoff(400, () => 0.5)], [0, 200]);
  for (const r of [0, 0.5, 0.9999]) {
    const d = m.heartbeatDelay(300, 0.1, () => r);
    if (!(d > 270 && d <= 300)) fails.push(`heartbeat delay ${d} for ${r}: want (270, 300]`);
  }
  eq('silence: 2.5 intervals, at least 2 s', [m.silenceLimit(300), m.silenceLimit(30000)], [2000, 75000]);
  // asksAck(beats since the last ask, quiet ms, interval, silence)
  eq('acks asked: the first, after an interval of quiet, every tenth', [
    m.asksAck(Infinity, 0, 30000, 75000), m.asksAck(1, 30000, 30000, 75000), m.asksAck(1, 30001, 30000, 75000),
    m.asksAck(9, 0, 30000, 75000), m.asksAck(m.ASK_EVERY, 0, 30000, 75000),
  ], [true, false, true, false, true]);
  eq('acks asked: silence - 1.5 intervals when that is less', [
    m.asksAck(1, 1000, 1000, 2000), m.asksAck(1, 501, 1000, 2000), m.asksAck(1, 1, 1000, 1000),
  ], [true, true, true]);
}

function attempts(eq, fails) {
  const key = 'unit.attempt';
  localStorage.removeItem(key);
  const before = Date.now();
  const a = m.nextAttempt(localStorage, key);
  if (!(a >= before && a <= Date.now())) fails.push(`first attempt ${a}: want the clock, ${before}`);
  eq('the same millisecond: one more', m.nextAttempt(localStorage, key, a), a + 1);
  eq('an older clock: still one more', m.nextAttempt(localStorage, key, a - 60000), a + 2);
  eq('kept in localStorage', localStorage.getItem(key), String(a + 2));
  localStorage.setItem(key, String(Date.now() + 3600e3)); // a tab whose clock ran ahead
  eq('above a stored one ahead of the clock', m.nextAttempt(localStorage, key), Number(localStorage.getItem(key)));
  const stored = Number(localStorage.getItem(key));
  eq('growing', m.nextAttempt(localStorage, key) > stored, true);
  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); } };
  eq('a storage that throws: the clock', m.nextAttempt(broken, key, 5000), 5000);
  localStorage.setItem(key, String(m.MAX_ATTEMPT));
  eq('never beyond 2^53 - 1', m.nextAttempt(localStorage, key), m.MAX_ATTEMPT);
  localStorage.removeItem(key);
}

function validation(refuses, accepts) {
  refuses('empty id', () => m.validId('target', ''), /1 to 128 characters/);
  refuses('long id', () => m.validId('target', 'a'.repeat(129)), /1 to 128 characters, got 129/);
  refuses('slash', () => m.validId('target', 'a/b'), /only letters, digits/);
  refuses('dot dot', () => m.validId('target', 'a..b'), /"\.\."/);
  refuses('non-ASCII', () => m.validId('target', 'é'), /only letters, digits/);
  accepts('128 characters', () => m.validId('target', 'a'.repeat(128)));
  accepts('every allowed character', () => m.validId('target', 'Az09._-@:x'));
  refuses('no targets', () => m.validTargets('subscribe', []), /subscribe: 0 targets: must be 1 to 1000/);
  refuses('1001 targets', () => m.validTargets('query', Array(1001).fill('a')), /query: 1001 targets: must be 1 to 1000/);
  refuses('a bad target among good ones', () => m.validTargets('subscribe', ['a', 'b/c']), /only letters/);
  accepts('1000 targets', () => m.validTargets('subscribe', Array(1000).fill('a')));
  refuses('show', () => m.validStatus({ show: 'busy' }), /show must be available, away, dnd, invisible, auto/);
  refuses('long text', () => m.validStatus({ show: 'dnd', text: 'x'.repeat(141) }), /141 characters: at most 140/);
  accepts('140 characters, not bytes', () => m.validStatus({ show: 'dnd', text: 'é'.repeat(140) }));
  refuses('control character', () => m.validStatus({ show: 'dnd', text: 'a\u0007' }), /control character/);
  refuses('expiry past', () => m.validStatus({ show: 'dnd', expiresMs: Date.now() - 1 }), /not in the future/);
  const c = new m.PresenceClient({ urls: ['ws://127.0.0.1:9/ws'], token: 't', trackActivity: false, storage: null });
  refuses('client subscribe', () => c.subscribe([]), /subscribe: 0 targets/);
  refuses('client tier', () => c.subscribe(['a'], { tier: 'slow' }), /tier must be realtime or batched/);
  refuses('client unsubscribe', () => c.unsubscribe(['a/b']), /only letters/);
  refuses('client status', () => c.setStatus({ show: 'away', text: 'a\nb' }), /control character/);
  refuses('client activity', () => c.setActivity('asleep'), /activity must be active, idle, background/);
  refuses('client query', () => c.query(['']), /1 to 128/);
  refuses('no URLs', () => new m.PresenceClient({ urls: [], token: 't' }), /at least one node URL/);
}

// claimAttempt: max(stored + 1, now) in IndexedDB, above localStorage's
// value and copied there
async function claims(eq, fails) {
  const key = 'unit.claim';
  localStorage.removeItem(key);
  const before = Date.now();
  const a = await m.claimAttempt(localStorage, key);
  if (!(a >= before && a <= Date.now())) fails.push(`first claim ${a}: want the clock, ${before}`);
  eq('the same millisecond: one more', await m.claimAttempt(localStorage, key, a), a + 1);
  eq('copied to localStorage', localStorage.getItem(key), String(a + 1));
  localStorage.setItem(key, String(a + 100)); // written by a page of an earlier version
  eq('above localStorage', await m.claimAttempt(localStorage, key, a), a + 101);
  localStorage.removeItem(key);
  eq('kept in IndexedDB', await m.claimAttempt(localStorage, key, a), a + 102);
  eq('no storage: the clock', await m.claimAttempt(null, key, 5000), 5000);
  localStorage.removeItem(key);
}

// the size of a frame: the UTF-8 bytes of its JSON, at most MAX_MESSAGE
function frames(eq, refuses, accepts) {
  eq('MAX_MESSAGE', m.MAX_MESSAGE, 64 * 1024);
  eq('bytes, not characters', m.frameBytes({ t: 'é' }), 10);
  accepts('a frame of MAX_MESSAGE bytes', () => m.validFrame('x', { t: 'a'.repeat(m.MAX_MESSAGE - 8) }));
  refuses('one byte more', () => m.validFrame('query', { t: 'a'.repeat(m.MAX_MESSAGE - 7) }),
    /query: the frame would be 65537 bytes: a message is at most 65536 bytes \(the node closes a larger one with 1009\)/);
  const frame = (targets, id) => ({ query: { request_id: id, targets } });
  const long = Array.from({ length: 1000 }, (_, i) => String(i).padStart(128, 'x'));
  const chunks = m.chunkTargets(long, frame);
  const full = `s${Number.MAX_SAFE_INTEGER}`;
  eq('1000 ids of 128 characters: in order, none lost', chunks.flat(), long);
  eq('each frame fits', chunks.map((c) => m.frameBytes(frame(c, full)) <= m.MAX_MESSAGE), chunks.map(() => true));
  eq('each frame full', chunks.slice(0, -1).map((c, i) => m.frameBytes(frame([...c, chunks[i + 1][0]], full)) > m.MAX_MESSAGE), [true, true]);
  eq('short ids: MAX_TARGETS a request', m.chunkTargets(Array(2500).fill('a'), frame).map((c) => c.length), [1000, 1000, 500]);
  eq('none: no request', m.chunkTargets([], frame), []);
}
