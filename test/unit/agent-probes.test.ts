// The agent's liveness cannot be denied by a pod (issue 34, item 6): its HTTP port is on the node's address, so
// any pod can open connections to it. With a plain cap of 64, 64 idle clients made /healthz fail (22 of 25
// probes) and the kubelet restarted the agent for as long as they stayed. Here: the admission decision, then the
// real server (startHttp) under 100 idle clients that reconnect as soon as they are closed, in a process of
// their own (test/support/net/http-flood.ts), while kubelet-like probes (a fresh connection, GET /healthz, 1 s
// timeout, every 150 ms) run from another address. test/e2e/agent-flood.test.ts runs the built agent as the
// DaemonSet sets it (the probes on their own listener) under issue 45's floods.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { admit, type Held, sourceOf } from '../../src/agent/admission.js';
import { MAX_CONNECTIONS, MAX_PER_SOURCE } from '../../src/agent/http-server.js';
import { startHttp } from '../../src/agent/http.js';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { FLOOD } from '../support/net/http-flood.js';

const LIMITS = { total: 4, perSource: 2 };
const c = (source: string, busy = false, id = ''): Held & { id: string } => ({ source, busy, id });

describe('admit', () => {
  it('admits while there is room; a source at its limit displaces its own oldest idle connection, never a busy one', () => {
    expect(admit([c('a')], 'b', LIMITS)).toBeUndefined();
    const own = [c('a', true, 'a1'), c('b', false, 'b1'), c('a', false, 'a2')];
    expect(admit(own, 'a', LIMITS)).toMatchObject({ id: 'a2' });
    expect(admit([c('a', true), c('a', true)], 'a', LIMITS)).toBe('newcomer');
  });

  it('a full port closes an idle connection of the heaviest source, not one of a source no heavier than the newcomer’s', () => {
    const limits = { total: 5, perSource: 3 };
    const full = [c('prom', true, 'm1'), c('pod', false, 'p1'), c('pod', false, 'p2'), c('pod', false, 'p3'), c('kubelet', false, 'k1')];
    expect(admit(full, 'kubelet', limits)).toMatchObject({ id: 'p1' });
    expect(admit(full, 'new', limits)).toMatchObject({ id: 'p1' });
    // Equal weights do not displace each other: a flood spread over sources is held, not churned.
    expect(admit([c('x'), c('y'), c('z'), c('w'), c('v')], 'x', limits)).toBe('newcomer');
    expect(admit([c('x'), c('x'), c('y'), c('y'), c('z')], 'x', limits)).toBe('newcomer');
    // A source new to a full port, every other holding one idle connection (72 addresses, one each): it gets in,
    // closing the oldest (issue 45, item 4: before, it needed a source of two, and every scrape was kept out).
    expect(admit([c('x', false, 'x1'), c('y'), c('z'), c('w'), c('v')], 'prometheus', limits)).toMatchObject({ id: 'x1' });
    expect(admit([c('x', true), c('y', false, 'y1'), c('z'), c('w'), c('v')], 'prometheus', limits)).toMatchObject({ id: 'y1' });
    // The heaviest has nothing idle: the next heaviest gives way; nothing idle anywhere: the newcomer.
    const busyPod = [c('pod', true), c('pod', true), c('pod', true)];
    expect(admit([...busyPod, c('pod2', false, 'q1'), c('pod2', false, 'q2')], 'kubelet', limits)).toMatchObject({ id: 'q1' });
    expect(admit([...busyPod, c('pod2', true), c('pod2', true)], 'kubelet', limits)).toBe('newcomer');
  });
});

describe('sourceOf', () => {
  it('counts an IPv4 address as itself (also mapped), an IPv6 address as its /64 (issue 45, item 4)', () => {
    expect(sourceOf('10.224.0.9')).toBe('10.224.0.9');
    expect(sourceOf('::ffff:10.224.0.9')).toBe('10.224.0.9');
    expect(sourceOf('fd00:45::1')).toBe('fd00:45::/64');
    expect(sourceOf('fd00:45:0:0:ffff:ffff:ffff:ffff')).toBe('fd00:45::/64');
    expect(sourceOf('fd00:45:0:1::1')).toBe('fd00:45:0:1::/64');
    expect(sourceOf('::1')).toBe('::/64');
    expect(sourceOf(undefined)).toBe('?');
    expect(sourceOf('not an address')).toBe('not an address');
  });
});

/** One kubelet-like probe: a new connection, GET `path`, 1 s timeout. */
function probe(port: number, path = '/healthz'): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
    req.end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const health = () => ({
  lastPass: { completed: true, at: Date.now() },
  entry: async () => ({ inUse: true as const, path: 't' }),
  lastBeat: Date.now(),
  stallMs: 600_000,
});

interface FloodRun {
  /** Each probe's status (or error code). */
  results: Array<number | string>;
  /** Connections the flood made. */
  connects: number;
  /** Connections the server held at once, at most. */
  peak: number;
  /** /metrics bodies rendered. */
  renders: number;
  /** Connections held once the flood was gone. */
  after: number;
}

/**
 * The real server under a flood (FLOOD) from `sources`, probed from 127.0.0.1 (another source) every 150 ms for
 * 7 s: past the 5 s after which the agent closes a silent connection (the flood then reconnects).
 */
async function underFlood(children: ChildProcess[], sources: string[], perSource: number, mode: string, path = '/healthz'): Promise<FloodRun> {
  const metrics = new AgentMetrics();
  let renders = 0;
  const render = metrics.render.bind(metrics);
  metrics.render = () => {
    renders++;
    return render();
  };
  const server = await startHttp({ host: '127.0.0.1', port: 0 }, metrics, health());
  try {
    const { port } = server.address() as AddressInfo;
    const flood = spawn(process.execPath, ['-e', FLOOD, '127.0.0.1', String(port), sources.join(','), String(perSource), mode], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(flood);
    let connects = 0;
    flood.stdout!.on('data', (d: Buffer) => (connects = Number(d.toString().trim().split('\n').at(-1))));
    const held = () => new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
    // Let the flood fill the port first.
    await sleep(1_000);
    let peak = 0;
    const sampling = setInterval(() => void held().then((n) => (peak = Math.max(peak, n))), 50);
    const results: Array<number | string> = [];
    const pending: Array<Promise<void>> = [];
    const end = Date.now() + 7_000;
    while (Date.now() < end) {
      pending.push(probe(port, path).then((r) => void results.push(r)));
      await sleep(150);
    }
    await Promise.all(pending);
    clearInterval(sampling);
    // The flood gone, nothing it opened stays.
    flood.kill('SIGKILL');
    await sleep(500);
    return { results, connects, peak, renders, after: await held() };
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

const failures = (r: FloodRun) => {
  const failed = r.results.filter((x) => x !== 200);
  return [failed, `${failed.length} of ${r.results.length} probes failed: ${[...new Set(failed)].join(', ')}`] as const;
};

describe("the agent's /healthz under a flood of idle connections", () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });

  it.each([
    ['100 idle clients from one pod', ['127.0.0.2'], 100, 'idle'],
    ['100 clients sending half a request, from ten pods', Array.from({ length: 10 }, (_, i) => `127.0.0.${10 + i}`), 10, 'partial'],
  ])('%s: every probe succeeds, the connections held stay within the caps', { timeout: 60_000 }, async (_name, sources, perSource, mode) => {
    const r = await underFlood(children, sources, perSource, mode);
    const [failed, why] = failures(r);
    expect(r.connects, 'the flood connected').toBeGreaterThanOrEqual(sources.length * perSource);
    expect(failed, why).toEqual([]);
    expect(r.results.length).toBeGreaterThanOrEqual(30);
    expect(r.peak, 'connections held at once').toBeLessThanOrEqual(Math.min(MAX_CONNECTIONS, sources.length * MAX_PER_SOURCE) + 1);
    expect(r.after).toBe(0);
  });
});

// Issue 45, item 5: Node answers pipelined requests in order but ran every handler at once, so 8,000 pipelined
// `GET /metrics` a client never read rendered 8,000 bodies into the agent's memory (333 MiB with one connection);
// and item 4: such clients from 4 addresses held all 64 slots busy, and 17 of 24 probes failed. Measured before
// the change with this test: renders = every request sent (tens of thousands), probes failing.
describe('clients that never read their answers', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });
  const fourPods = Array.from({ length: 4 }, (_, i) => `127.0.0.${30 + i}`);

  it.each([
    ['8,000 pipelined /metrics a connection', 'pipeline'],
    ['4 more /metrics every 20 ms', 'trickle'],
  ])(
    '%s, 16 connections from each of 4 pods: every scrape and probe answered, one answer in flight a connection',
    { timeout: 60_000 },
    async (_name, mode) => {
      const r = await underFlood(children, fourPods, MAX_PER_SOURCE, mode, '/metrics');
      const [failed, why] = failures(r);
      expect(r.connects, 'the flood connected').toBeGreaterThanOrEqual(fourPods.length * MAX_PER_SOURCE);
      expect(failed, why).toEqual([]);
      expect(r.results.length).toBeGreaterThanOrEqual(30);
      // Rendered: one at a time for everyone waiting; measured here: RENDERS.
      console.log(`${mode}: ${r.connects} connections, ${r.renders} renders, ${r.results.length} probes`);
      expect(r.peak, 'connections held at once').toBeLessThanOrEqual(MAX_CONNECTIONS + 1);
      expect(r.after).toBe(0);
    },
  );

  it('a client that pipelines a few requests gets every answer, in order', async () => {
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, new AgentMetrics(), health());
    try {
      const { port } = server.address() as AddressInfo;
      const text = await new Promise<string>((resolve, reject) => {
        let got = '';
        const s = connect({ port, host: '127.0.0.1' }, () => {
          const get = (path: string, close = false) => `GET ${path} HTTP/1.1\r\nHost: agent\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
          s.write(get('/metrics') + get('/nope') + get('/healthz') + get('/readyz', true));
        });
        s.on('data', (d: Buffer) => (got += d.toString()));
        s.on('end', () => resolve(got));
        s.on('error', reject);
      });
      expect([...text.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((m) => Number(m[1]))).toEqual([200, 404, 200, 200]);
      expect(text).toContain('ipam_shim_agent_reconcile_passes_total');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

/** What the server at `port` answers to `chunks`, written one after another (`gapMs` apart), until it closes. */
function exchange(port: number, chunks: string[], gapMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const s = connect({ port, host: '127.0.0.1' }, async () => {
      for (const c of chunks) {
        s.write(c);
        if (gapMs) await sleep(gapMs);
      }
    });
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('close', () => resolve(got));
    s.on('error', reject);
  });
}

describe("the agent's HTTP/1.1 server (src/agent/http-server.ts)", () => {
  it('answers heads sent a byte at a time, HEAD without a body, HTTP/1.0 once; refuses bodies, long heads and junk', {
    timeout: 30_000,
  }, async () => {
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, new AgentMetrics(), health());
    try {
      const { port } = server.address() as AddressInfo;
      const status = (text: string) => [...text.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((m) => Number(m[1]));
      const slow = await exchange(port, [...'\r\nGET /healthz?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'], 2);
      expect(status(slow)).toEqual([200]);
      expect(slow).toMatch(/\r\n\r\nok\n$/);
      const head = await exchange(port, ['HEAD /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
      expect(head).toMatch(/content-length: 3\r\nconnection: close\r\n\r\n$/);
      // HTTP/1.0 without keep-alive: one answer, then closed (the second request is never answered).
      expect(status(await exchange(port, ['GET /healthz HTTP/1.0\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n']))).toEqual([200]);
      expect(status(await exchange(port, ['GET /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello']))).toEqual([400]);
      expect(status(await exchange(port, ['GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n']))).toEqual([400]);
      expect(status(await exchange(port, [`GET /healthz HTTP/1.1\r\nX: ${'a'.repeat(9_000)}\r\n\r\n`]))).toEqual([431]);
      expect(status(await exchange(port, ['hello\r\n\r\n']))).toEqual([400]);
      expect(status(await exchange(port, ['POST /healthz HTTP/1.1\r\nConnection: close\r\n\r\n']))).toEqual([405]);
      expect(status(await exchange(port, ['GET http://agent/healthz HTTP/1.1\r\nConnection: close\r\n\r\n']))).toEqual([200]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('answers computed once for every request waiting on them', () => {
  it('a /readyz whose file read never returns holds the requests of the next 5 s, not every later one', { timeout: 30_000 }, async () => {
    let calls = 0;
    const h = { ...health(), entry: () => (++calls === 1 ? new Promise<never>(() => {}) : Promise.resolve({ inUse: true as const, path: 't' })) };
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, undefined, h);
    try {
      const { port } = server.address() as AddressInfo;
      const first = probe(port, '/readyz');
      await sleep(200);
      expect(await probe(port, '/readyz'), 'shares the call under way').toBe('timeout');
      await sleep(5_000);
      expect(await probe(port, '/readyz')).toBe(200);
      expect(await first).toBe('timeout');
      expect(calls).toBe(2);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('the probe listener', () => {
  it('serves /healthz and /readyz alone', async () => {
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, undefined, health());
    try {
      const { port } = server.address() as AddressInfo;
      expect(await probe(port, '/healthz')).toBe(200);
      expect(await probe(port, '/readyz')).toBe(200);
      expect(await probe(port, '/metrics')).toBe(404);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
