// The cache-driven GC (`ipam-shim gc`, the node agent) never forwards CNI GC to a delegate that speaks 1.1.0: its
// keep list would be only our ledger, and a chained ADD in flight (the delegate already allocated, the ledger and
// the runtime's cache not yet written) is in neither. Real ledger, real Delegate running the fake-ipam fixture.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShimSettingsSchema, type NetConf } from '../../src/cni/config.js';
import { Delegate } from '../../src/effects/delegate.js';
import { Ledger } from '../../src/effects/ledger.js';
import { run } from '../../src/effects/exec.js';
import { silentLogger } from '../../src/log.js';
import { gcFromCache } from '../../src/gc/from-cache.js';
import { runGc } from '../../src/gc/run-gc.js';
import { podRecord } from '../support/doubles/ledger-record.js';

const FIXTURE_BIN = join(__dirname, '..', 'fixtures', 'bin');
let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const old = new Date(Date.now() - 86_400_000).toISOString();
const rec = (containerID: string, ip: string) => podRecord(containerID, ip, old);

async function world() {
  dir = await mkdtemp(join(tmpdir(), 'gc-forward-'));
  const log = join(dir, 'delegate.log');
  const settings = ShimSettingsSchema.parse({ stateDir: join(dir, 'state') });
  const ipam = { type: 'fake-ipam' };
  const conf = {
    raw: { cniVersion: '1.1.0', name: 'net', type: 'ipam-shim', delegate: ipam },
    cniVersion: '1.1.0',
    name: 'net',
    placement: 'slot',
    settings,
    prevResult: undefined,
    validAttachments: [],
  } as unknown as NetConf;
  const ledger = await new Ledger(settings.stateDir, 'net').open();
  await ledger.put(rec('live', '10.99.0.2'));
  await ledger.put(rec('leak', '10.99.0.3'));
  const delegate = new Delegate({
    type: 'fake-ipam',
    cniPath: [FIXTURE_BIN],
    env: { ...process.env, FAKE_IPAM_SPEAKS: '1.1.0', FAKE_IPAM_LOG: log },
    timeoutMs: 10_000,
    log: silentLogger,
  });
  // The runtime's cache knows the live pod only.
  const cacheDir = join(dir, 'cache');
  await mkdir(join(cacheDir, 'results'), { recursive: true });
  await writeFile(
    join(cacheDir, 'results', 'net-live-eth0'),
    JSON.stringify({ kind: 'cniCacheV1', containerId: 'live', ifName: 'eth0', networkName: 'net' }),
  );
  const calls = async () =>
    (await readFile(log, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ').slice(0, 2).join(' '));
  return { conf, ledger, delegate, cacheDir, calls };
}

describe('GC forwarding to a 1.1.0 delegate', () => {
  it('the cache-driven GC releases the leak by a DEL under its lock and sends the delegate no GC', async () => {
    const w = await world();
    const out = await gcFromCache(
      { conf: w.conf, ledger: w.ledger, delegate: w.delegate, run, log: silentLogger },
      { cacheDir: w.cacheDir, apply: true, graceMs: 0, allowEmptyCache: false },
    );
    expect(out.report.released).toEqual([{ containerID: 'leak', ifname: 'eth0' }]);
    expect(out.report.forwarded).toBe(false);
    const calls = await w.calls();
    expect(calls.filter((c) => c.startsWith('GC'))).toEqual([]);
    expect(calls).toContain('DEL leak');
    expect(await w.ledger.get({ containerID: 'live', ifname: 'eth0' })).toBeDefined();
  });

  it('the GC verb (the runtime runs it exclusively) still forwards, so the fixture does answer GC', async () => {
    const w = await world();
    const report = await runGc({
      conf: w.conf,
      ledger: w.ledger,
      delegate: w.delegate,
      run,
      log: silentLogger,
      valid: [{ containerID: 'live', ifname: 'eth0' }],
      apply: true,
      graceMs: 0,
      forward: true,
    });
    expect(report.forwarded).toBe(true);
    expect((await w.calls()).filter((c) => c.startsWith('GC'))).toHaveLength(1);
  });
});
