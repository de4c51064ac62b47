// The agent's HTTP endpoints: /metrics (Prometheus), /healthz (the process answers and its loop is not wedged),
// /readyz (the shim is installed where the runtime reads it and the last pass completed; a JSON body says why
// not). Loopback by default: the DaemonSet's hostNetwork pod sets the port. A probe listener (--probe-listen)
// serves /healthz and /readyz alone, on an address only the node reaches (the DaemonSet's: 127.0.0.1), so no
// client of the metrics port, which every pod can reach, can fail the kubelet's probes (issue 45, item 4).
// The server, and what one client may hold on either: src/agent/http-server.ts.
import type { ListVerdict } from '../cni/list-versions.js';
import type { EntryInUse } from '../conflist.js';
import { type AgentServer, type Answer, startServer } from './http-server.js';
import type { AgentMetrics } from './metrics.js';

/** The last pass as readiness sees it: completed = the shim's network opened and the pass ran to its end. */
interface LastPass {
  completed: boolean;
  /** Why it did not complete. */
  why?: string;
  /** Unix ms it ended. */
  at: number;
}

export interface HealthState {
  /** undefined until the first pass ends. */
  lastPass: LastPass | undefined;
  /** Whether the shim's entry is in the network config the runtime uses now (src/conflist.ts shimEntryInUse). */
  entry: () => Promise<EntryInUse>;
  /** The runtime's list against its plugins' VERSION answers (src/agent/list-versions.ts); undefined: no list judged yet. */
  versions?: ListVerdict | undefined;
  /** Unix ms of the last loop activity (a pass started or ended, a wait began). */
  lastBeat: number;
  /** A loop that has shown no activity for this long is unhealthy (a pass stuck on a lock or a tool). */
  stallMs: number;
}

/**
 * Parses `HOST:PORT`, `[V6]:PORT`, `V6:PORT` (split at the last colon: what the DaemonSet's `$(NODE_IP):PORT`
 * gives on an IPv6 node) or `PORT` (host 127.0.0.1). Throws on anything else.
 */
export function parseListen(text: string, flag = '--listen'): { host: string; port: number } {
  const t = text.trim();
  const at = t.lastIndexOf(':');
  const [hostText, portText] = at < 0 ? ['127.0.0.1', t] : [t.slice(0, at), t.slice(at + 1)];
  const host = hostText.replace(/^\[(.*)\]$/, '$1');
  const port = Number(portText);
  if (!/^\d{1,5}$/.test(portText) || port < 1 || port > 65535 || !host || /[\s/[\]$()]/.test(host)) {
    throw new Error(`${flag} ${JSON.stringify(text)}: expected HOST:PORT or PORT`);
  }
  return { host, port };
}

/** Why the agent is not ready (the JSON body's `reason`), checked in this order. */
type NotReady = 'list-version' | 'not-installed' | 'no-pass-yet' | 'pass-incomplete';

interface Readiness {
  ready: boolean;
  reason?: NotReady;
  why?: string;
  /** The network config the runtime uses (when there is one). */
  conflist?: string;
  lastPass?: LastPass;
  /** What the list's plugins answered to VERSION: taken, refused, or not-asked (said, never taken for fine). */
  listVersion?: { state: ListVerdict['state']; message: string; use?: string };
}

/** /readyz's answer: ready only when the entry is in use now and the last pass completed. */
async function readiness(health: HealthState): Promise<Readiness> {
  const entry = await health.entry();
  const last = health.lastPass;
  const v = health.versions;
  const where = {
    ...(entry.path ? { conflist: entry.path } : {}),
    ...(last ? { lastPass: last } : {}),
    ...(v ? { listVersion: { state: v.state, message: v.message, ...(v.use ? { use: v.use } : {}) } } : {}),
  };
  // First: with a refused list the entry is kept out (install's rule), and every ADD fails whatever the shim does.
  if (v?.state === 'refused') return { ready: false, reason: 'list-version', why: v.message, ...where };
  if (!entry.inUse) return { ready: false, reason: 'not-installed', why: entry.reason, ...where };
  if (!last) return { ready: false, reason: 'no-pass-yet', why: 'the first reconcile pass has not ended', ...where };
  if (!last.completed) return { ready: false, reason: 'pass-incomplete', why: last.why ?? 'the last reconcile pass did not complete', ...where };
  return { ready: true, ...where };
}

/** How long a call under way is shared (shared()). */
const SHARED_FOR_MS = 5_000;

/**
 * One call of `f` at a time: who asks while one is under way gets its answer. A flood of /metrics or /readyz
 * requests (every connection answered one request at a time, but 64 connections) costs one render at a time,
 * not one each (a render is ~0.3 ms of CPU and 8 KB). A call under way for SHARED_FOR_MS (a file read that does
 * not return) is not shared any more: the next request starts its own, so one hang is not every later answer's.
 */
function shared<T>(f: () => Promise<T>): () => Promise<T> {
  let under: { p: Promise<T>; at: number } | undefined;
  return () => {
    if (under && Date.now() - under.at < SHARED_FOR_MS) return under.p;
    const mine: { p: Promise<T>; at: number } = {
      p: f().finally(() => {
        if (under === mine) under = undefined;
      }),
      at: Date.now(),
    };
    under = mine;
    return mine.p;
  };
}
/**
 * Serves /metrics, /healthz and /readyz on `listen`; with `metrics` undefined (the probe listener), /healthz and
 * /readyz alone.
 */
export function startHttp(listen: { host: string; port: number }, metrics: AgentMetrics | undefined, health: HealthState): Promise<AgentServer> {
  const paths = metrics ? '/metrics /healthz /readyz' : '/healthz /readyz';
  const ready = shared(() => readiness(health));
  const render = metrics && shared(() => metrics.render());
  return startServer(listen, async ({ path }): Promise<Answer> => {
    if (path === '/healthz') {
      const idle = Date.now() - health.lastBeat;
      return idle < health.stallMs ? { code: 200, body: 'ok\n' } : { code: 503, body: `reconcile loop silent for ${Math.round(idle / 1000)} s\n` };
    }
    if (path === '/readyz') {
      const json = 'application/json';
      try {
        const r = await ready();
        return { code: r.ready ? 200 : 503, body: `${JSON.stringify(r)}\n`, type: json };
      } catch (e) {
        return { code: 503, body: `${JSON.stringify({ ready: false, reason: 'error', why: (e as Error).message })}\n`, type: json };
      }
    }
    if (path === '/metrics' && render) {
      try {
        const m = await render();
        return { code: 200, body: m.body, type: m.contentType };
      } catch (e) {
        return { code: 500, body: `metrics: ${(e as Error).message}\n` };
      }
    }
    return { code: 404, body: `not found: ${paths}\n` };
  });
}
