// The node agent's pure parts and its registry: listen addresses, the jittered wait, and the plugin's textfile
// series exposed on /metrics exactly as the plugin wrote them.
import { mkdtemp, rm } from 'node:fs/promises';
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
    expect(settings.listen).toEqual({ host: '127.0.0.1', port: 9740 });
    for (const bad of [
      ['--gc', 'yes'],
      ['--interval', '0'],
      ['--interval', ''],
      ['--jitter', '1'],
      ['--listen', 'x'],
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
});
