// A reconcile pass ends whatever a step is doing (issue 34 item 3): a step past its bound is abandoned (reported,
// counted) and the pass, and the next one, go on; after SIGTERM the step under way gets a grace to reach its next
// safe point, then the pass ends without it. The steps hang here on a Run whose programs never answer (what a
// stuck file system call or a tool beyond every timeout looks like to the pass); the network, ledger and cache are
// real files.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { reconcileOnce, type ReconcileOptions } from '../../src/agent/reconcile.js';
import { runElsewhere } from '../../src/effects/exec.js';
import { Ledger } from '../../src/effects/ledger.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';
import { silentLogger } from '../../src/log.js';
import { podRecord } from '../support/doubles/ledger-record.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

/** Every program "runs" forever. */
const hanging = runElsewhere(() => new Promise(() => undefined));

async function world(): Promise<Omit<ReconcileOptions, 'signal' | 'bounds'>> {
  dir = await mkdtemp(join(tmpdir(), 'pass-bounds-'));
  const stateDir = join(dir, 'state');
  const confDir = join(dir, 'net.d');
  await mkdir(confDir);
  const list = {
    cniVersion: '1.0.0',
    name: 'net',
    plugins: [
      { type: 'ptp', ipam: { type: 'host-local' } },
      { type: 'ipam-shim', stateDir, logFile: join(dir, 'shim.log') },
    ],
  };
  await writeFile(join(confDir, '10-net.conflist'), JSON.stringify(list));
  const ledger = await new Ledger(stateDir, 'net').open();
  await ledger.put(podRecord('pod-a', '10.0.0.2'));
  await mkdir(join(dir, 'cache', 'results'), { recursive: true });
  await writeFile(
    join(dir, 'cache', 'results', 'net-pod-a-eth0'),
    JSON.stringify({ kind: 'cniCacheV1', containerId: 'pod-a', ifName: 'eth0', networkName: 'net', result: { ips: [{ address: '10.0.0.2/24' }] } }),
  );
  return {
    network: { confDir, network: 'net', cniPath: '/nonexistent' },
    env: {},
    run: hanging,
    log: silentLogger,
    metrics: new AgentMetrics(),
    gc: { mode: 'report', cacheDir: join(dir, 'cache'), graceMs: 0, allowEmptyCache: false },
  };
}

const series = async (m: AgentMetrics, name: string, labels: Record<string, string>) =>
  parseMetrics((await m.render()).body).get(seriesKey(name, labels))?.value;

describe('a reconcile pass with a step that never returns', () => {
  it('the step is abandoned at its bound, reported and counted; the pass completes, and so does the next', { timeout: 20_000 }, async () => {
    const w = await world();
    const signal = new AbortController().signal;
    for (let pass = 1; pass <= 2; pass++) {
      const t0 = Date.now();
      const r = await reconcileOnce({ ...w, signal, bounds: { stepMs: 300, stopGraceMs: 100 } });
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(r.steps).toMatchObject({ network: 'ok', gc: 'ok', pods: 'ok', residue: 'abandoned' });
      expect(r.stopped).toBe(false);
      expect(r.errors).toBeGreaterThanOrEqual(1);
      expect(await series(w.metrics, 'ipam_shim_agent_steps_total', { step: 'residue', outcome: 'abandoned' })).toBe(pass);
      expect(await series(w.metrics, 'ipam_shim_agent_errors_total', { step: 'residue' })).toBeGreaterThanOrEqual(pass);
    }
  });

  it('SIGTERM: the step under way gets its grace, then the pass ends without it (stopped), the steps after it never start', {
    timeout: 20_000,
  }, async () => {
    const w = await world();
    const ac = new AbortController();
    const t0 = Date.now();
    const running = reconcileOnce({ ...w, signal: ac.signal, bounds: { stepMs: 600_000, stopGraceMs: 200 } });
    setTimeout(() => ac.abort(), 300);
    const r = await running;
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(r.stopped).toBe(true);
    expect(r.steps.residue).toBe('stopped');
    expect(r.steps.probe).toBe('stopped');
  });
});
