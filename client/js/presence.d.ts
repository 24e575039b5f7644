// Types of presence.js, the browser SDK (docs/protocol.md has the frames).

export const SUBPROTOCOL: 'presence.v1.json';
export const MAX_ID_LEN: 128;
export const MAX_TARGETS: 1000;
export const MAX_STATUS_TEXT: 140;
export const MAX_ATTEMPT: number;
/** The largest message a node reads, in bytes (messages.MaxMessage): a larger one is closed with 1009. */
export const MAX_MESSAGE: 65536;
/** Default of Options.refusedLimit. */
export const REFUSED_LIMIT: 10;
/** Close codes (messages.CloseCode); ABNORMAL (1006) is the browser's own, a cut without a close frame. */
export const Close: Readonly<{
  GOING_AWAY: 1001; PROTOCOL_ERROR: 1002; WRONG_TYPE: 1003; ABNORMAL: 1006; INVALID_DATA: 1007; TOO_BIG: 1009;
  SUPERSEDED: 4001; OVERFLOW: 4008; TOKEN_EXPIRED: 4401; STATE_SYNC: 4409;
}>;

export type Show = 'available' | 'away' | 'dnd' | 'invisible' | 'auto';
export type Activity = 'active' | 'idle' | 'background';
export type Tier = 'realtime' | 'batched';
export type Platform = 'mobile' | 'desktop' | 'web' | 'other';
export type Status = 'online' | 'offline' | 'recently' | 'long_ago' | 'unknown';
export const SHOWS: readonly Show[];
export const ACTIVITIES: readonly Activity[];
export const TIERS: readonly Tier[];
export const PLATFORMS: readonly Platform[];

/** A presence as the node sends it (protojson: absent fields are their zero value). */
export interface Presence {
  user: string;
  status?: Status;
  /** uint64 as a decimal string: compare with compareVersions. */
  version?: string;
  last_seen_minute?: number;
  show?: Exclude<Show, 'auto'>;
  devices?: { platform?: Platform; activity?: Activity }[];
  idle_since_minute?: number;
  status_text?: string;
}

export interface Hello {
  conn_id: string; node: string; user: string; device: string; epoch: string;
  heartbeat_interval_ms: number; heartbeat_class?: string; stale_ms: number;
  half_open_bound_ms: number; idle_after_ms?: number; platform?: Platform;
}

export class InputError extends Error {}
export class PresenceError extends Error {
  readonly code: number;
  readonly serverMessage: string;
  readonly retryAfterMs: number;
  readonly requestId: string;
}
export class ClosedError extends Error {
  /** The close code that ended it (4001, 4401, 4409), 0 for none. */
  readonly code: number;
}
/** The client gave up after Options.refusedLimit dials in a row that never opened with one token. */
export class RefusedError extends ClosedError {
  readonly dials: number;
}

export function compareVersions(a: string | number | undefined, b: string | number | undefined): -1 | 0 | 1;
export function nextBackoff(cur: number, max: number): number;
export function drawBackoff(bound: number, random?: () => number): number;
export function heartbeatDelay(intervalMs: number, jitter?: number, random?: () => number): number;
export function silenceLimit(intervalMs: number): number;
export const ASK_EVERY: 10;
export function asksAck(beats: number, quietMs: number, intervalMs: number, silenceMs: number): boolean;
export function nextAttempt(storage: Pick<Storage, 'getItem' | 'setItem'> | null, key: string, now?: number): number;
/** nextAttempt claimed in an IndexedDB transaction: never the same number in two tabs. */
export function claimAttempt(storage: Pick<Storage, 'getItem' | 'setItem'> | null, key: string, now?: number): Promise<number>;
export function validId(kind: string, id: string): void;
export function validTargets(op: string, targets: string[]): void;
/** The UTF-8 bytes of frame's JSON. */
export function frameBytes(frame: object): number;
/** Throws an InputError when frame is over MAX_MESSAGE bytes. */
export function validFrame(op: string, frame: object): void;
/** targets in requests of at most MAX_TARGETS whose frame(targets, id) fits in MAX_MESSAGE bytes. */
export function chunkTargets(targets: string[], frame: (targets: string[], id: string) => object): string[][];
export interface Timers { set(fn: () => void, ms: number): unknown; clear(id: unknown): void; }
export const pageTimers: Timers;
/** A dedicated Worker's timers (not slowed down in a hidden tab) where one can be made, else pageTimers. */
export function clientTimers(useWorker?: boolean): Timers;
export const DEFAULTS: Readonly<Required<Omit<Options, 'urls' | 'token' | 'refresh' | 'activity' | 'storage' | 'WebSocket'>>>;
export function validStatus(status: StatusInput, now?: number): void;
export function tokenExpiryMs(token: string): number | null;

export interface StatusInput {
  show: Show;
  text?: string;
  /** Absolute Unix ms; 0 or absent: until changed. */
  expiresMs?: number;
}

export interface Options {
  /** Node /ws URLs (ws:, wss:, http(s): or a path such as '/ws': this page's node); 1001, silence and lost connections move to the next. */
  urls: string[];
  token: string;
  /** A new token after 4401 or 4409, or before dialing with an expired one; none: the client ends. */
  refresh?: () => string | Promise<string>;
  /** Default 'web'; '' sends none. */
  platform?: Platform | '';
  /** The activity declared at the start (trackActivity declares it from the page). */
  activity?: Activity;
  /** Heartbeat class: '' (standard) or 'battery'. */
  deviceClass?: '' | 'standard' | 'battery';
  backoffMinMs?: number;
  backoffMaxMs?: number;
  jitter?: number;
  /** 0: 2.5 x the hello's heartbeat interval, at least 2 s. */
  silenceMs?: number;
  dialTimeoutMs?: number;
  /**
   * Dials in a row that never opened before the client calls refresh, and
   * ends with a RefusedError if it gives no other token (default 10; 0:
   * never).
   */
  refusedLimit?: number;
  /**
   * Where the attempt number is kept; default localStorage, claimed in
   * IndexedDB (never the same in two tabs); another storage is used alone,
   * null keeps it in memory.
   */
  storage?: Pick<Storage, 'getItem' | 'setItem'> | null;
  storageKey?: string;
  /** Declare activity from Page Visibility and input events (default true). */
  trackActivity?: boolean;
  /** No input for this long on a visible page: idle (default 120000). */
  inputIdleMs?: number;
  random?: () => number;
  /** Time heartbeats and waits in a dedicated Worker (default true): a hidden tab keeps its heartbeats. */
  workerTimers?: boolean;
  WebSocket?: typeof WebSocket;
}

export interface PresenceEventMap {
  presence: CustomEvent<{ presence: Presence; snapshot: boolean }>;
  snapshot: CustomEvent<{ requestId: string; targets: string[]; presences: Presence[] }>;
  state: CustomEvent<{
    state: 'connecting' | 'connected' | 'disconnected'; url: string; node?: string;
    attempt?: number; gapMs?: number; code?: number | 'silent' | 'stopped'; reason?: string;
  }>;
  error: CustomEvent<{ error: PresenceError | Error }>;
  closed: CustomEvent<{ error: ClosedError | Error | null; code: number }>;
  /** The node degraded targets to pull: targets of this frame, pulling all of them now (sorted), the pace in ms (at least 100). */
  degraded: CustomEvent<{ targets: string[]; pulling: string[]; retryAfterMs: number }>;
  /** Pulling stopped for targets (sorted): the node restored push (ended false) or the connection ended (ended true). */
  restored: CustomEvent<{ targets: string[]; ended: boolean }>;
}

export class PresenceClient extends EventTarget {
  constructor(options: Options);
  start(): this;
  stop(): void;
  readonly hello: Hello | null;
  readonly connected: boolean;
  readonly attempt: number;
  readonly connections: number;
  readonly gapMs: number;
  /** The round trip of the last heartbeat the node acked, in ms (0 before the first); one is asked for at least every ASK_EVERY heartbeats. */
  readonly rttMs: number;
  readonly activity: Activity | '';
  /** The targets the node degraded to pull, sorted: the client queries them itself until restored or the connection ends. */
  pulling(): string[];
  state(target: string): Presence | undefined;
  states(): Map<string, Presence>;
  subscribe(targets: string[], options?: { tier?: Tier }): void;
  unsubscribe(targets: string[]): void;
  query(targets: string[], options?: { signal?: AbortSignal }): Promise<Presence[]>;
  setStatus(status: StatusInput): void;
  setActivity(activity: Activity): void;
  addEventListener<K extends keyof PresenceEventMap>(type: K, listener: (ev: PresenceEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof PresenceEventMap>(type: K, listener: (ev: PresenceEventMap[K]) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}
