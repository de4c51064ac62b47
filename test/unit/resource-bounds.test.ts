// What the node agent holds stays bounded however it is used: connections to its HTTP port (at most
// MAX_CONNECTIONS, the rest closed as they arrive; silent ones closed by the agent itself), log-file descriptors
// (one per file per process), and tool calls without a bound of their own (withDefaultTimeout). The agent as a whole: test/e2e/agent-soak.test.ts.
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_CONNECTIONS } from '../../src/agent/http-server.js';
import { startHttp } from '../../src/agent/http.js';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { run, runElsewhere, withDefaultTimeout } from '../../src/effects/exec.js';
import { createLogger } from '../../src/log.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('the agent HTTP server', () => {
  const sockets: Socket[] = [];
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });

  it(`serves at most ${MAX_CONNECTIONS} connections at once: ${MAX_CONNECTIONS * 2} idle ones leave it at the cap, and it still answers once they go`, async () => {
    const server = await startHttp({ host: '127.0.0.1', port: 0 }, new AgentMetrics(), {
      lastPass: { completed: true, at: Date.now() },
      entry: async () => ({ inUse: true, path: 'test' }),
      lastBeat: Date.now(),
      stallMs: 60_000,
    });
    try {
      const { port } = server.address() as AddressInfo;
      let closedByServer = 0;
      await Promise.all(
        Array.from(
          { length: MAX_CONNECTIONS * 2 },
          () =>
            new Promise<void>((resolve) => {
              const s = connect(port, '127.0.0.1', () => resolve());
              s.on('close', () => closedByServer++);
              s.on('error', () => resolve());
              sockets.push(s);
            }),
        ),
      );
      await new Promise((r) => setTimeout(r, 300));
      const held = await new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
      expect(held).toBeLessThanOrEqual(MAX_CONNECTIONS);
      expect(closedByServer).toBeGreaterThanOrEqual(MAX_CONNECTIONS);
      for (const s of sockets.splice(0)) s.destroy();
      await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(res.status).toBe(200);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('log files', () => {
  it('a process holds one descriptor per log file, however many loggers write to it (the agent made one per pass)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-log-'));
    try {
      const file = join(dir, 'shim.log');
      const fds = () => readdirSync('/proc/self/fd').length;
      createLogger({ file }).info('first');
      const before = fds();
      for (let i = 0; i < 50; i++) createLogger({ file, base: { pass: i } }).info('again');
      expect(fds() - before).toBeLessThanOrEqual(1);
      const lines = (await readFile(file, 'utf8')).trim().split('\n');
      expect(lines).toHaveLength(51);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('withDefaultTimeout', () => {
  it("bounds every call that sets no timeout, keeps a caller's own, and runs where the wrapped Run runs", async () => {
    const seen: Array<number | undefined> = [];
    const fake = runElsewhere(async (_file, _args, opts = {}) => {
      seen.push(opts.timeoutMs);
      return { stdout: '', stderr: '', exitCode: 0, timedOut: false, notFound: false };
    });
    const bounded = withDefaultTimeout(fake, 1234);
    await bounded('x', []);
    await bounded('x', [], { timeoutMs: 5 });
    expect(seen).toEqual([1234, 5]);
    expect(withDefaultTimeout(run, 1000).here).toBe(true);
    expect(bounded.here).toBe(false);
    // A real stuck child is killed at the bound.
    const t0 = Date.now();
    const r = await withDefaultTimeout(run, 300)('sleep', ['30'], { check: false });
    expect(r.timedOut).toBe(true);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
