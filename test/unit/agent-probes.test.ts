// The agent's liveness cannot be denied by a pod (issue 34, item 6): its HTTP port is on the node's address, so
// any pod can open connections to it. With a plain cap of 64, 64 idle clients made /healthz fail (22 of 25
// probes) and the kubelet restarted the agent for as long as they stayed. Here: the admission decision, then the
// real server (startHttp) under 100 idle clients that reconnect as soon as they are closed, in a process of
// their own, while kubelet-like probes (a fresh connection, GET /healthz, 1 s timeout, every 150 ms) run from
// another address, as the kubelet's come from the node's own.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { admit, type Held } from '../../src/agent/admission.js';
import { MAX_CONNECTIONS, MAX_PER_SOURCE, startHttp } from '../../src/agent/http.js';
import { AgentMetrics } from '../../src/agent/metrics.js';

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
    // The heaviest has nothing idle: the next heaviest gives way; nothing idle anywhere: the newcomer.
    const busyPod = [c('pod', true), c('pod', true), c('pod', true)];
    expect(admit([...busyPod, c('pod2', false, 'q1'), c('pod2', false, 'q2')], 'kubelet', limits)).toMatchObject({ id: 'q1' });
    expect(admit([...busyPod, c('pod2', true), c('pod2', true)], 'kubelet', limits)).toBe('newcomer');
  });
});

/** A flood in a process of its own: `perSource` clients from each source address, each reconnecting once closed. */
const FLOOD = `
const net = require('node:net');
const [port, sources, perSource, partial] = [Number(process.argv[1]), process.argv[2].split(','), Number(process.argv[3]), process.argv[4] === 'partial'];
let connects = 0;
const client = (localAddress) => {
  const s = net.connect({ port, host: '127.0.0.1', localAddress }, () => {
    connects++;
    // A partial request: the head never ends (slowloris); otherwise nothing at all.
    if (partial) s.write('GET /healthz HTTP/1.1\\r\\nHost: agent\\r\\n');
  });
  s.on('error', () => {});
  s.on('close', () => setImmediate(() => client(localAddress)));
};
for (const src of sources) for (let i = 0; i < perSource; i++) client(src);
setInterval(() => process.stdout.write(connects + '\\n'), 500);
`;

/** One kubelet-like probe: a new connection, GET /healthz, 1 s timeout. */
function probe(port: number): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
    req.end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the agent's /healthz under a flood of idle connections", () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });

  it.each([
    ['100 idle clients from one pod', ['127.0.0.2'], 100, 'idle'],
    ['100 clients sending half a request, from ten pods', Array.from({ length: 10 }, (_, i) => `127.0.0.${10 + i}`), 10, 'partial'],
  ])('%s: every probe succeeds, the connections held stay within the caps', { timeout: 60_000 }, async (_name, sources, perSource, mode) => {
    const health = {
      lastPass: { completed: true, at: Date.now() },
      entry: async () => ({ inUse: true as const, path: 't' }),
      lastBeat: Date.now(),
      stallMs: 600_000,
    };
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, new AgentMetrics(), health);
    try {
      const { port } = server.address() as AddressInfo;
      const flood = spawn(process.execPath, ['-e', FLOOD, String(port), sources.join(','), String(perSource), mode], {
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
      // 7 s of probes: past the 5 s after which the agent closes a silent connection (the flood then reconnects).
      const results: Array<number | string> = [];
      const pending: Array<Promise<void>> = [];
      const end = Date.now() + 7_000;
      while (Date.now() < end) {
        pending.push(probe(port).then((r) => void results.push(r)));
        await sleep(150);
      }
      await Promise.all(pending);
      clearInterval(sampling);
      const failed = results.filter((r) => r !== 200);
      expect(connects, 'the flood connected').toBeGreaterThanOrEqual(sources.length * perSource);
      expect(failed, `${failed.length} of ${results.length} probes failed: ${[...new Set(failed)].join(', ')}`).toEqual([]);
      expect(results.length).toBeGreaterThanOrEqual(30);
      expect(peak, 'connections held at once').toBeLessThanOrEqual(Math.min(MAX_CONNECTIONS, sources.length * MAX_PER_SOURCE) + 1);
      // The flood gone, nothing it opened stays.
      flood.kill('SIGKILL');
      await sleep(500);
      expect(await held()).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
