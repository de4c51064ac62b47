// The agent's HTTP endpoints: /metrics (Prometheus), /healthz (the process answers and its loop is not wedged),
// /readyz (the shim is installed where the runtime reads it and the last pass completed; a JSON body says why
// not). Loopback by default: the DaemonSet's hostNetwork pod sets the port.
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { ListVerdict } from '../cni/list-versions.js';
import type { EntryInUse } from '../conflist.js';
import { admit, type Held } from './admission.js';
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
export function parseListen(text: string): { host: string; port: number } {
  const t = text.trim();
  const at = t.lastIndexOf(':');
  const [hostText, portText] = at < 0 ? ['127.0.0.1', t] : [t.slice(0, at), t.slice(at + 1)];
  const host = hostText.replace(/^\[(.*)\]$/, '$1');
  const port = Number(portText);
  if (!/^\d{1,5}$/.test(portText) || port < 1 || port > 65535 || !host || /[\s/[\]$()]/.test(host)) {
    throw new Error(`--listen ${JSON.stringify(text)}: expected HOST:PORT or PORT`);
  }
  return { host, port };
}

/**
 * Connections open at once. Prometheus and the kubelet's probes need a few; without a cap every open connection
 * costs the agent a descriptor (toward its RLIMIT_NOFILE) and a socket for as long as the client keeps it. A
 * full port makes room by closing an idle connection of the heaviest source (src/agent/admission.ts).
 */
export const MAX_CONNECTIONS = 64;
/**
 * Connections one address may hold at once: a pod flooding the port (it is on the node's address) holds this
 * many, the kubelet's probes come from the node's own address and Prometheus from its pod's.
 */
export const MAX_PER_SOURCE = 16;
/**
 * A connection that has not sent a whole request within this, or has been idle this long, is closed: idle or
 * trickling clients hold no slot for long (the kubelet sends its probe at once). One value for the three: with a
 * header timeout shorter than the idle timeout, Node 24 never closed a connection that sent nothing at all
 * (measured).
 */
const CLIENT_TIMEOUT_MS = 5_000;

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

export async function startHttp(listen: { host: string; port: number }, metrics: AgentMetrics, health: HealthState): Promise<Server> {
  // The request timeouts are checked every second (Node's default: every 30 s).
  const server = createServer(
    { connectionsCheckingInterval: 1_000, headersTimeout: CLIENT_TIMEOUT_MS, requestTimeout: CLIENT_TIMEOUT_MS },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const send = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
        res.writeHead(code, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
        res.end(req.method === 'HEAD' ? undefined : body);
      };
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'method not allowed\n');
      if (path === '/healthz') {
        const idle = Date.now() - health.lastBeat;
        return idle < health.stallMs ? send(200, 'ok\n') : send(503, `reconcile loop silent for ${Math.round(idle / 1000)} s\n`);
      }
      if (path === '/readyz') {
        readiness(health).then(
          (r) => send(r.ready ? 200 : 503, `${JSON.stringify(r)}\n`, 'application/json'),
          (e: unknown) => send(503, `${JSON.stringify({ ready: false, reason: 'error', why: (e as Error).message })}\n`, 'application/json'),
        );
        return;
      }
      if (path === '/metrics') {
        metrics.render().then(
          (m) => send(200, m.body, m.contentType),
          (e: unknown) => send(500, `metrics: ${(e as Error).message}\n`),
        );
        return;
      }
      send(404, 'not found: /metrics /healthz /readyz\n');
    },
  );
  server.keepAliveTimeout = 5_000;
  // A connection that sends nothing at all is not a request the header timeout sees: closed when idle as long.
  server.timeout = CLIENT_TIMEOUT_MS;
  limitConnections(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** An open connection: its socket, its peer, whether a request is being served on it. */
interface Conn extends Held {
  socket: Socket;
  requests: number;
}

/**
 * Admission (src/agent/admission.ts) on every connection the server accepts. Node's own server.maxConnections
 * closes the newcomer, whoever it is: 64 idle clients of one pod kept the kubelet's probes out.
 */
function limitConnections(server: Server): void {
  // Oldest activity first: a connection moves to the end when it arrives and when its last request ends.
  const open = new Map<Socket, Conn>();
  server.on('connection', (socket: Socket) => {
    const source = socket.remoteAddress ?? '?';
    const victim = admit([...open.values()], source, { total: MAX_CONNECTIONS, perSource: MAX_PER_SOURCE });
    if (victim === 'newcomer') {
      socket.destroy();
      return;
    }
    if (victim) {
      open.delete(victim.socket);
      victim.socket.destroy();
    }
    const conn: Conn = { socket, source, busy: false, requests: 0 };
    open.set(socket, conn);
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req, res) => {
    const conn = open.get(req.socket as Socket);
    if (!conn) return;
    conn.requests++;
    conn.busy = true;
    res.once('close', () => {
      conn.requests--;
      conn.busy = conn.requests > 0;
      if (!conn.busy && open.has(conn.socket)) {
        open.delete(conn.socket);
        open.set(conn.socket, conn);
      }
    });
  });
}
