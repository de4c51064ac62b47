// The agent's HTTP/1.1 server: GET and HEAD without a body, one request answered at a time per connection, and
// nothing a client sends or leaves unread held past a small bound (issue 34, item 6; issue 45, items 4 and 5).
// Not node:http: it parses every request of a read at once and runs every handler at once, so 8,000 pipelined
// `GET /metrics` that were never read rendered 8,000 bodies into memory (333 MiB with one connection, 753 MiB
// with 16, against the DaemonSet's 384 Mi), and each read of such a flood cost ~2,000 request objects (event
// loop stalls of 340 ms under 16 connections: the probes starved). Here a connection's next request is parsed
// only once the answer before it has been handed to the kernel (the socket is not read meanwhile: TCP pushes
// back), what it sent and we did not parse yet is at most MAX_BUFFERED bytes, an answer the client does not
// take within ANSWER_TIMEOUT_MS closes it, and admission (src/agent/admission.ts) decides who holds a slot.
import { STATUS_CODES } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { admit, type Held, sourceOf } from './admission.js';

/**
 * Connections open at once. Prometheus and the kubelet's probes need a few; without a cap every open connection
 * costs the agent a descriptor (toward its RLIMIT_NOFILE) and a socket for as long as the client keeps it. A
 * full port makes room by closing an idle connection of the heaviest source (src/agent/admission.ts).
 */
export const MAX_CONNECTIONS = 64;
/**
 * Connections one source (an IPv4 address, an IPv6 /64) may hold at once: a pod flooding the metrics port (it is
 * on the node's address) holds this many; Prometheus comes from its pod's address.
 */
export const MAX_PER_SOURCE = 16;
/**
 * A connection that has not sent a whole request head within this (after connecting or after its last answer)
 * is closed: idle, silent or trickling clients hold no slot for long (the kubelet sends its probe at once).
 */
const CLIENT_TIMEOUT_MS = 5_000;
/**
 * From a whole request until the kernel has taken all of its answer, at most: a client that does not read its
 * answers is closed (each answer is small; Prometheus and the kubelet read at once).
 */
const ANSWER_TIMEOUT_MS = 10_000;
/** A request head (request line and headers) longer than this is refused (431) and the connection closed. */
const MAX_HEAD_BYTES = 8 * 1024;
/**
 * Bytes received and not yet parsed: pipelined requests wait here while the one before is answered. A client
 * that sends more without taking its answers is closed.
 */
const MAX_BUFFERED = 64 * 1024;
/**
 * A connection's next request is taken this long after the one before it started, at the soonest. Prometheus
 * and the kubelet send one request a connection at a time, seconds apart; a client that pipelines, or sends
 * more as soon as the kernel has taken an answer (it need not read it for that), made the agent render
 * /metrics ~3,500 times a second, all of its CPU, and the probes starved. At this pace 64 connections cost
 * at most 640 answers a second.
 */
const REQUEST_GAP_MS = 100;
/**
 * Requests on one connection; the answer to the last says `connection: close` (Prometheus reconnects). It
 * bounds what one connection can leave queued in the kernel for a client that never reads (~8 KB an answer).
 */
const MAX_REQUESTS = 100;

/** A request as the routes see it. */
interface Request {
  method: string;
  /** The target's path, without the query. */
  path: string;
}

export interface Answer {
  code: number;
  body: string;
  type?: string;
}

export type Route = (req: Request) => Answer | Promise<Answer>;

/** The server; closeAllConnections() destroys every connection (close() alone waits for them). */
export type AgentServer = Server & { closeAllConnections(): void };

const TEXT = 'text/plain; charset=utf-8';

/** One open connection as admission sees it, and its parsing state. */
class Conn implements Held {
  /** Received, not parsed yet. */
  buf: Buffer = Buffer.alloc(0);
  /** How much of buf is known to hold no head's end: a head sent a byte at a time is scanned once, not per byte. */
  scanned = 0;
  /**
   * A request is being answered: computed (busy), written and not yet taken by the kernel, or taken and the
   * next one not due yet (REQUEST_GAP_MS). Nothing more is read from the socket meanwhile.
   */
  answering = false;
  busy = false;
  /** The client has half-closed: answer what it sent, then close. */
  peerEnded = false;
  served = 0;
  /** When the request being answered (or the last one) was taken. */
  started = 0;
  timer: NodeJS.Timeout | undefined;
  constructor(
    readonly socket: Socket,
    readonly source: string,
  ) {}
  /** Closes the connection after `ms` unless rearmed or cleared first. */
  deadline(ms: number | undefined): void {
    clearTimeout(this.timer);
    this.timer = ms === undefined ? undefined : setTimeout(() => this.socket.destroy(), ms);
    this.timer?.unref();
  }
}

type Parsed = { request: Request; keepAlive: boolean } | { refuse: number } | undefined;

/** Parses one request head at the start of `conn.buf` (consuming it); undefined: not whole yet. */
function parseHead(conn: Conn): Parsed {
  // Empty lines before a request line are ignored (RFC 9112, 2.2): dropped, so they are skipped once.
  let start = 0;
  while (conn.buf[start] === 0x0d || conn.buf[start] === 0x0a) start++;
  if (start) {
    conn.buf = conn.buf.subarray(start);
    conn.scanned = Math.max(0, conn.scanned - start);
  }
  const end = conn.buf.indexOf('\r\n\r\n', Math.max(0, conn.scanned - 3));
  if (end < 0) {
    conn.scanned = conn.buf.length;
    return conn.buf.length > MAX_HEAD_BYTES ? { refuse: 431 } : undefined;
  }
  conn.scanned = 0;
  if (end > MAX_HEAD_BYTES) return { refuse: 431 };
  const lines = conn.buf.subarray(0, end).toString('latin1').split('\r\n');
  conn.buf = conn.buf.subarray(end + 4);
  const line = /^([A-Z]+) (\S+) HTTP\/1\.([01])$/.exec(lines[0] ?? '');
  if (!line) return { refuse: 400 };
  const headers = new Map<string, string>();
  for (const h of lines.slice(1)) {
    const colon = h.indexOf(':');
    if (colon <= 0) return { refuse: 400 };
    headers.set(
      h.slice(0, colon).trim().toLowerCase(),
      h
        .slice(colon + 1)
        .trim()
        .toLowerCase(),
    );
  }
  // No route takes a body: one would have to be read past, so a request announcing one is refused.
  if (headers.has('transfer-encoding') || (headers.get('content-length') ?? '0') !== '0') return { refuse: 400 };
  const [, method, target, minor] = line as unknown as [string, string, string, string];
  let path = '';
  if (target.startsWith('/')) path = target.split('?')[0]!;
  else {
    try {
      path = new URL(target).pathname;
    } catch {
      // no path: answered 404 by the routes
    }
  }
  const connection = headers.get('connection') ?? '';
  const keepAlive = minor === '1' ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
  return { request: { method: method!, path }, keepAlive };
}

/** Listens on `listen` and answers each request with `route`. */
export async function startServer(listen: { host: string; port: number }, route: Route): Promise<AgentServer> {
  // Oldest activity first: a connection moves to the end when it arrives and when an answer has been taken.
  const open = new Map<Socket, Conn>();
  const server = createServer({ allowHalfOpen: true, noDelay: true });

  const write = (conn: Conn, a: Answer, head: boolean, keepAlive: boolean) => {
    conn.busy = false;
    const body = Buffer.from(a.body);
    const text =
      `HTTP/1.1 ${a.code} ${STATUS_CODES[a.code] ?? ''}\r\ncontent-type: ${a.type ?? TEXT}\r\ncontent-length: ${body.length}\r\n` +
      `connection: ${keepAlive ? 'keep-alive' : 'close'}\r\n\r\n`;
    conn.socket.write(head ? text : Buffer.concat([Buffer.from(text, 'latin1'), body]), (err) => {
      if (err || conn.socket.destroyed) return;
      if (!keepAlive) {
        // Closed for good once the client has closed its side, or by the deadline.
        conn.deadline(CLIENT_TIMEOUT_MS);
        conn.socket.end();
        return;
      }
      if (open.delete(conn.socket)) open.set(conn.socket, conn);
      conn.deadline(CLIENT_TIMEOUT_MS);
      const go = () => {
        if (conn.socket.destroyed) return;
        conn.answering = false;
        conn.socket.resume();
        next(conn);
      };
      const wait = conn.started + REQUEST_GAP_MS - Date.now();
      if (wait > 0) setTimeout(go, wait).unref();
      else go();
    });
  };

  const refuse = (conn: Conn, code: number) => {
    conn.answering = true;
    conn.buf = Buffer.alloc(0);
    conn.socket.pause();
    conn.deadline(ANSWER_TIMEOUT_MS);
    write(conn, { code, body: `${STATUS_CODES[code]}\n` }, false, false);
  };

  /** Parses and answers the next request, if it is there and nothing is being answered. */
  const next = (conn: Conn) => {
    if (conn.answering || conn.socket.destroyed) return;
    const parsed = parseHead(conn);
    if (!parsed) {
      if (conn.peerEnded) conn.socket.end();
      return;
    }
    if ('refuse' in parsed) return refuse(conn, parsed.refuse);
    conn.answering = true;
    conn.busy = true;
    conn.served++;
    conn.started = Date.now();
    // Nothing more is read until this answer has been taken.
    conn.socket.pause();
    conn.deadline(ANSWER_TIMEOUT_MS);
    const { request, keepAlive } = parsed;
    const again = keepAlive && conn.served < MAX_REQUESTS;
    const head = request.method === 'HEAD';
    if (request.method !== 'GET' && !head) return write(conn, { code: 405, body: 'method not allowed\n' }, false, again);
    let answer: Answer | Promise<Answer>;
    try {
      answer = route(request);
    } catch (e) {
      answer = { code: 500, body: `${(e as Error).message}\n` };
    }
    Promise.resolve(answer).then(
      (a) => write(conn, a, head, again),
      (e: unknown) => write(conn, { code: 500, body: `${(e as Error).message}\n` }, head, again),
    );
  };

  server.on('connection', (socket: Socket) => {
    socket.on('error', () => {});
    const conn = new Conn(socket, sourceOf(socket.remoteAddress));
    // Node's server.maxConnections closes the newcomer, whoever it is: 64 idle clients of one pod kept the
    // kubelet's probes out.
    const victim = admit([...open.values()], conn.source, { total: MAX_CONNECTIONS, perSource: MAX_PER_SOURCE });
    if (victim === 'newcomer') {
      socket.destroy();
      return;
    }
    if (victim) {
      open.delete(victim.socket);
      victim.socket.destroy();
    }
    open.set(socket, conn);
    conn.deadline(CLIENT_TIMEOUT_MS);
    socket.once('close', () => {
      conn.deadline(undefined);
      open.delete(socket);
    });
    socket.on('data', (chunk: Buffer) => {
      if (conn.buf.length + chunk.length > MAX_BUFFERED) {
        socket.destroy();
        return;
      }
      conn.buf = conn.buf.length ? Buffer.concat([conn.buf, chunk]) : chunk;
      next(conn);
    });
    socket.on('end', () => {
      conn.peerEnded = true;
      next(conn);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return Object.assign(server, {
    closeAllConnections: () => {
      for (const socket of open.keys()) socket.destroy();
    },
  });
}
