// The node agent's pure parts and its registry: listen addresses, the jittered wait, and the plugin's textfile
// series exposed on /metrics exactly as the plugin wrote them.
import { execa } from 'execa';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseListen } from '../../src/agent/http.js';
import { nextDelay } from '../../src/agent/daemon.js';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { parseMetrics, seriesKey, updateMetricsFile } from '../../src/metrics.js';
import { parseAgentArgs } from '../../src/cli/agent.js';
import { UsageError } from '../../src/contract/command.js';
import { ErrorCode } from '../../src/cni/errors.js';

describe('parseListen', () => {
  it.each([
    ['9740', { host: '127.0.0.1', port: 9740 }],
    ['127.0.0.1:9740', { host: '127.0.0.1', port: 9740 }],
    ['0.0.0.0:1', { host: '0.0.0.0', port: 1 }],
    ['[::1]:9740', { host: '::1', port: 9740 }],
    ['fd00::4:9740', { host: 'fd00::4', port: 9740 }],
  ])('%s', (text, want) => expect(parseListen(text)).toEqual(want));
  it.each(['', ':9740', 'host:', 'host:0', 'host:65536', 'host:80x', '$(NODE_IP):9740x', '$(NODE_IP):9740'])('refuses %j', (text) =>
    expect(() => parseListen(text)).toThrow(/--listen/),
  );
});

describe('nextDelay', () => {
  it('stays within interval × (1 ± jitter)', () => {
    expect(nextDelay(30_000, 0.1, () => 0)).toBe(27_000);
    expect(nextDelay(30_000, 0.1, () => 0.5)).toBe(30_000);
    expect(nextDelay(30_000, 0.1, () => 0.999999)).toBe(33_000);
    expect(nextDelay(30_000, 0, Math.random)).toBe(30_000);
  });
});

describe('agent flags', () => {
  it('report by default, every value checked', () => {
    const { settings } = parseAgentArgs(['--no-install']);
    expect(settings.gc).toMatchObject({ mode: 'report', graceMs: 60_000, cacheDir: '/var/lib/cni', allowEmptyCache: false });
    expect(settings.gc).toMatchObject({ confirmAfterMs: 900_000, confirmPasses: 3 });
    expect(settings.listen).toEqual({ host: '127.0.0.1', port: 9740 });
    expect(parseAgentArgs(['--no-install', '--gc', 'confirmed', '--gc-confirm-after', '2.5', '--gc-confirm-passes', '4']).settings.gc).toMatchObject({
      mode: 'confirmed',
      confirmAfterMs: 2_500,
      confirmPasses: 4,
    });
    expect(settings.probeListen).toBeUndefined();
    expect(parseAgentArgs(['--no-install', '--probe-listen', '127.0.0.1:9741']).settings.probeListen).toEqual({ host: '127.0.0.1', port: 9741 });
    expect(() => parseAgentArgs(['--no-install', '--probe-listen', 'x'])).toThrow(/--probe-listen "x"/);
    for (const bad of [
      ['--gc', 'yes'],
      ['--gc-confirm-after', '-1'],
      ['--gc-confirm-after', ''],
      ['--gc-confirm-passes', '0'],
      ['--gc-confirm-passes', '1.5'],
      ['--interval', '0'],
      ['--interval', ''],
      ['--jitter', '1'],
      ['--listen', 'x'],
      ['--probe-listen', '127.0.0.1:9740'],
      ['--log-level', 'loud'],
      ['--bogus'],
    ]) {
      expect(() => parseAgentArgs(['--no-install', ...bad]), bad.join(' ')).toThrow(UsageError);
    }
  });
});

describe('AgentMetrics', () => {
  let dir: string | undefined;
  afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

  it("exposes the plugin's textfile series with prom-client, re-read at every scrape", async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-metrics-'));
    const file = join(dir, 'ipam-shim.prom');
    const u = {
      network: 'cilium',
      verb: 'ADD',
      code: 0,
      counts: { residueRules: 2, residueNeighbours: 1, gcReleased: 0 },
      ledger: { attachments: 3, agentIps: 1 },
      nowSeconds: 1_700_000_000,
    };
    await updateMetricsFile(file, u);
    const m = new AgentMetrics();
    expect(parseMetrics((await m.render()).body).get(seriesKey('ipam_shim_invocations_total', { network: 'cilium', verb: 'ADD' }))).toBeUndefined();
    m.pluginFile = file;
    m.passes.inc({ outcome: 'ok' });
    let scraped = parseMetrics((await m.render()).body);
    expect(scraped.get(seriesKey('ipam_shim_invocations_total', { network: 'cilium', verb: 'ADD' }))?.value).toBe(1);
    expect(scraped.get(seriesKey('ipam_shim_residue_removed_total', { network: 'cilium', kind: 'ebtables' }))?.value).toBe(2);
    expect(scraped.get(seriesKey('ipam_shim_ledger_attachments', { network: 'cilium' }))?.value).toBe(3);
    expect(scraped.get(seriesKey('ipam_shim_agent_reconcile_passes_total', { outcome: 'ok' }))?.value).toBe(1);
    await updateMetricsFile(file, { ...u, code: ErrorCode.ReservedAddress });
    const body = (await m.render()).body;
    scraped = parseMetrics(body);
    expect(scraped.get(seriesKey('ipam_shim_invocations_total', { network: 'cilium', verb: 'ADD' }))?.value).toBe(2);
    expect(scraped.get(seriesKey('ipam_shim_errors_total', { network: 'cilium', verb: 'ADD', code: '100' }))?.value).toBe(1);
    expect(body).toContain('# TYPE ipam_shim_invocations_total counter');
    expect(body).toContain('# TYPE ipam_shim_ledger_attachments gauge');
  });

  it("serves every opened network's error series at 0 before the plugin wrote any", async () => {
    const m = new AgentMetrics();
    expect((await m.render()).body).not.toMatch(/^ipam_shim_errors_total\{/m);
    m.networkKnown('cilium');
    const scraped = parseMetrics((await m.render()).body);
    for (const verb of ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'])
      for (const code of Object.values(ErrorCode))
        expect(scraped.get(seriesKey('ipam_shim_errors_total', { network: 'cilium', verb, code: String(code) }))?.value, `${verb} ${code}`).toBe(0);
  });

  it('a textfile that is a FIFO, a /dev/zero link or a sparse file: each scrape answered at once without it, said once', async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-metrics-'));
    const warned: Array<Record<string, unknown>> = [];
    const m = new AgentMetrics({ warn: (fields: Record<string, unknown>) => void warned.push(fields) } as never);
    m.networkKnown('cilium');
    const scrape = async () => {
      const t0 = performance.now();
      const body = (await m.render()).body;
      return { body, ms: performance.now() - t0 };
    };
    const fifo = join(dir, 'fifo.prom');
    await execa('mkfifo', [fifo]);
    const zero = join(dir, 'zero.prom');
    await symlink('/dev/zero', zero);
    const sparse = join(dir, 'sparse.prom');
    await writeFile(sparse, '');
    await truncate(sparse, 2 * 1024 ** 3);
    for (const file of [fifo, zero, sparse]) {
      m.pluginFile = file;
      for (let i = 0; i < 2; i++) {
        const r = await scrape();
        expect(r.ms, file).toBeLessThan(1000);
        expect(parseMetrics(r.body).get(seriesKey('ipam_shim_errors_total', { network: 'cilium', verb: 'ADD', code: '7' }))?.value).toBe(0);
        expect(parseMetrics(r.body).get(seriesKey('ipam_shim_agent_reconcile_passes_total', { outcome: 'ok' }))?.value).toBe(0);
      }
    }
    // Once per file, not per scrape.
    expect(warned.map((w) => w.metricsFile)).toEqual([fifo, zero, sparse]);
  });

  it('a textfile whose directory is a symlink to another holding a file of that name: not served, said once', async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-metrics-'));
    const warned: Array<Record<string, unknown>> = [];
    const m = new AgentMetrics({ warn: (fields: Record<string, unknown>) => void warned.push(fields) } as never);
    m.networkKnown('cilium');
    const victim = join(dir, 'victim');
    await mkdir(victim);
    const planted = 'ipam_shim_invocations_total{network="victim",verb="ADD"} 4242\n';
    await writeFile(join(victim, 'ipam-shim.prom'), planted);
    await symlink(victim, join(dir, 'metrics'));
    const file = join(dir, 'metrics', 'ipam-shim.prom');
    m.pluginFile = file;
    for (let i = 0; i < 2; i++) {
      const t0 = performance.now();
      const body = (await m.render()).body;
      expect(performance.now() - t0).toBeLessThan(1000);
      // Before: the victim's series was served (the symlinked directory was followed).
      expect(body).not.toContain('victim');
      expect(parseMetrics(body).get(seriesKey('ipam_shim_errors_total', { network: 'cilium', verb: 'ADD', code: '7' }))?.value).toBe(0);
    }
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ metricsFile: file });
    expect(String((warned[0]!.err as Error).message)).toMatch(/metrics is a symlink/);
    expect(await readFile(join(victim, 'ipam-shim.prom'), 'utf8')).toBe(planted);
    expect(await readdir(victim)).toEqual(['ipam-shim.prom']);
    // A missing directory is a missing file: nothing said.
    m.pluginFile = join(dir, 'nowhere', 'ipam-shim.prom');
    await m.render();
    expect(warned).toHaveLength(1);
  });
});
