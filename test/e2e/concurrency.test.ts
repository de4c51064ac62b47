// Many attachments at once through the BUILT shim and the real reference plugins, in both placements:
// every address handed out once, the ledger and host-local's store agreeing after each phase, nothing left
// after the DELs, no half-written ledger file. Plus the ledger lock itself under many processes.
//
// Sizes (CI defaults; raise them locally):
//   IPAM_SHIM_CONC_N        parallel ADDs then DELs per placement (default 64, the number)
//   IPAM_SHIM_INTERLEAVE_N  containers in the interleaved ADD/DEL run (default 40; the full run is 200)
//   IPAM_SHIM_LOCK_PROCS / IPAM_SHIM_LOCK_ITERS  processes × acquisitions in the lock test (default 24 × 60)
import { build } from 'esbuild';
import { execa } from 'execa';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLE_SHIM, invoke, PLUGIN_DIR, ROOT, SEA_SHIM, shimBinDir } from '../support/shim/cni.js';
import { hostLocal, shimConf, shimKeys } from '../support/shim/conf.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { disagreements, envInt, hostLocalStore, pool, readLedger } from '../support/shim/robust.js';
import type { JsonObject } from '../support/runtimes/runner.js';
import { newRuntime, skipRuntime } from '../support/runtimes/runtimes.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const haveRoot = rootOrSkip();
const N = envInt('IPAM_SHIM_CONC_N', 64);
const INTERLEAVE_N = envInt('IPAM_SHIM_INTERLEAVE_N', 40);
const LOCK_PROCS = envInt('IPAM_SHIM_LOCK_PROCS', 24);
const LOCK_ITERS = envInt('IPAM_SHIM_LOCK_ITERS', 60);

const { s, net } = useScratchNet();

/** The shim in the IPAM slot (as ptp would call it), dual-stack host-local below it. */
function slotConf(name: string): JsonObject {
  // probeRewrite off: host nftables is not this suite's business
  return shimConf({ name, dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.234.0.0/23', 'fd00:234::/112') });
}

const slotEnv = (command: string, cid: string, bin?: string) => ({
  command,
  containerID: cid,
  netns: `/run/netns/gone-${cid}`,
  ifname: 'eth0',
  path: [PLUGIN_DIR],
  bin,
});

async function expectConsistent(network: string, expectedRecords: number): Promise<void> {
  const ledger = await readLedger(s.stateDir, network);
  const store = await hostLocalStore(s.dataDir, network);
  expect(disagreements(ledger, store)).toEqual([]);
  expect(ledger.records.size).toBe(expectedRecords);
  expect(ledger.lockPresent, 'the ledger lock is released when nobody runs').toBe(false);
  expect(ledger.attachmentLocks, 'attachment locks are released when nobody runs').toEqual([]);
}

describe.skipIf(!haveRoot)('IPAM slot: the shim over host-local, invoked directly', () => {
  // Both builds: the single executable starts from its startup snapshot, where state the warm-up left once broke
  // every call that had to wait for the ledger lock (exit 0, nothing on stdout; src/warm.ts).
  it.each([
    ['the bundle', BUNDLE_SHIM],
    ['the single executable', SEA_SHIM],
  ])(`%s: ${N} parallel ADDs get distinct addresses, then ${N} parallel DELs leave nothing`, async (_build, bin) => {
    const network = `conc-${uid()}`;
    const conf = slotConf(network);
    const ids = Array.from({ length: N }, (_, i) => `conc-${i}`);
    const added = await Promise.all(ids.map((cid) => invoke(conf, slotEnv('ADD', cid, bin))));
    for (const [i, out] of added.entries()) {
      expect(out.exitCode, `${ids[i]}: ${out.stdout}${out.stderr}`).toBe(0);
      expect(out.json?.ips, `${ids[i]}: an ADD that succeeded printed no result: ${JSON.stringify(out.stdout)}`).toBeDefined();
    }
    const ips = added.flatMap((o) => o.json.ips.map((ip: { address: string }) => ip.address.split('/')[0]));
    expect(ips).toHaveLength(2 * N);
    expect(new Set(ips).size).toBe(2 * N);
    await expectConsistent(network, N);
    const ledger = await readLedger(s.stateDir, network);
    for (const [i, cid] of ids.entries()) {
      expect(ledger.records.get(`${cid}:eth0`)?.ips.sort()).toEqual(
        added[i]!.json.ips.map((ip: { address: string }) => ip.address.split('/')[0]).sort(),
      );
    }

    const deleted = await Promise.all(ids.map((cid, i) => invoke({ ...conf, prevResult: added[i]!.json }, slotEnv('DEL', cid, bin))));
    for (const [i, out] of deleted.entries()) expect(out.exitCode, `${ids[i]}: ${out.stdout}`).toBe(0);
    await expectConsistent(network, 0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect((await readLedger(s.stateDir, network)).index).toEqual(new Map());
  });

  it(`${INTERLEAVE_N} containers with ADD and DEL interleaved: consistent at every checkpoint, empty at the end`, async () => {
    const network = `intl-${uid()}`;
    const conf = slotConf(network);
    const ids = Array.from({ length: INTERLEAVE_N }, (_, i) => `intl-${i}`);
    // Every third container stays attached until the checkpoint; the others are DELed at a random moment
    // while other containers are being ADDed. One container never has two operations at once (runtime rule).
    const keep = new Set(ids.filter((_, i) => i % 3 === 0));
    const results = new Map<string, JsonObject>();
    const failures: string[] = [];
    await pool(ids, 16, async (cid) => {
      const a = await invoke(conf, slotEnv('ADD', cid));
      if (a.exitCode !== 0) return void failures.push(`ADD ${cid}: ${a.stdout}`);
      results.set(cid, a.json);
      if (keep.has(cid)) return;
      await new Promise((r) => setTimeout(r, Math.random() * 300));
      const d = await invoke({ ...conf, prevResult: a.json }, slotEnv('DEL', cid));
      if (d.exitCode !== 0) failures.push(`DEL ${cid}: ${d.stdout}`);
    });
    expect(failures).toEqual([]);
    const everIps = [...results.values()].flatMap((r) => (r.ips as Array<{ address: string }>).map((ip) => ip.address));
    await expectConsistent(network, keep.size);
    // Addresses are reused after DEL, but never two live holders: the kept ones are pairwise distinct.
    const kept = [...keep].flatMap((cid) => (results.get(cid)!.ips as Array<{ address: string }>).map((ip) => ip.address));
    expect(new Set(kept).size).toBe(kept.length);
    expect(everIps.length).toBe(2 * INTERLEAVE_N);

    const dels = await Promise.all([...keep].map((cid) => invoke({ ...conf, prevResult: results.get(cid) }, slotEnv('DEL', cid))));
    expect(dels.filter((d) => d.exitCode !== 0).map((d) => d.stdout)).toEqual([]);
    await expectConsistent(network, 0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
  });
});

// Through the real libcni only (the cnitool harness): the TypeScript runner added nothing here that libcni does
// not do, and cost as long again.
describe.skipIf(!haveRoot || skipRuntime('libcni'))(
  'chained after cilium-cni (the 1.17 stand-in), through the real libcni (cnitool harness), in network namespaces',
  () => {
    const a = useCiliumAgent();
    it(`${N} parallel ADDs into ${N} netnses, then ${N} parallel DELs`, async () => {
      const network = `chn-${uid()}`;
      const node = await net.netns('node');
      const third = 100 + (process.pid % 100);
      const bin = await shimBinDir(s.dir);
      const runner = newRuntime('libcni', {
        confList: {
          cniVersion: '1.0.0',
          name: network,
          plugins: [
            ciliumCni({ type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: `10.236.${third}.0/24` }]] }),
            shimKeys({ dirs: s, probeRewrite: false }),
          ],
        },
        pluginDirs: [ciliumCniDir('1.17'), bin, PLUGIN_DIR],
        cacheDir: join(s.dir, 'cache'),
        netns: node,
        env: a.agent.env(),
      });
      const names = await pool(Array.from({ length: N }), 8, () => net.netns('conc'));
      // Anything the test leaves attached is DELed before the namespaces go (cleanup runs in reverse order).
      net.defer(() => pool(names, 8, (ns) => runner.del(`c-${ns}`, `/run/netns/${ns}`).catch(() => undefined)));

      const settled = await Promise.allSettled(names.map((ns) => runner.add(`c-${ns}`, `/run/netns/${ns}`)));
      expect(settled.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
      const results = settled.map((r) => (r as PromiseFulfilledResult<JsonObject>).value);
      const ips = results.map((r) => String((r.ips as Array<{ address: string }>)[0]!.address).split('/')[0]!);
      expect(new Set(ips).size).toBe(N);
      await expectConsistent(network, N);
      // The address really is in the namespace the ledger names.
      const ledger = await readLedger(s.stateDir, network);
      for (const i of [0, Math.floor(N / 2), N - 1]) {
        const rec = ledger.records.get(`c-${names[i]}:eth0`)!;
        expect(rec.netns).toBe(`/run/netns/${names[i]}`);
        expect((await inNs(names[i]!, 'ip', ['-4', '-o', 'addr', 'show', 'eth0'])).stdout).toContain(`${rec.ips[0]}/`);
      }

      const dels = await Promise.allSettled(names.map((ns) => runner.del(`c-${ns}`, `/run/netns/${ns}`)));
      expect(dels.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
      await expectConsistent(network, 0);
      expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
      expect(await runner.cachedAttachments()).toEqual([]);
    });
  },
);

describe('the ledger lock across processes', () => {
  it(`${LOCK_PROCS} processes × ${LOCK_ITERS} acquisitions: never two holders at once`, async () => {
    // Each worker holds the real lock (src/effects/lock.ts) and, inside it, claims a marker file with O_EXCL:
    // a second holder finds the marker taken. Before the fix for a lock that was still empty (just created,
    // id not yet written) being broken as stale, 24 × 60 found 13–18 overlaps in every run (4 of 4).
    const dir = join(s.dir, 'lockdir');
    await mkdir(dir);
    const source = join(s.dir, 'lock-worker.ts');
    await writeFile(
      source,
      `import { withLock } from ${JSON.stringify(join(ROOT, 'src/effects/lock.ts'))};
import { closeSync, openSync, unlinkSync, constants } from 'node:fs';
const [dir, iters] = [process.argv[2], Number(process.argv[3])];
let overlaps = 0;
for (let i = 0; i < iters; i++) {
  await withLock(dir + '/lock', async () => {
    try { closeSync(openSync(dir + '/held', constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY)); } catch { overlaps++; return; }
    await new Promise((r) => setImmediate(r));
    unlinkSync(dir + '/held');
  }, 60_000);
}
process.stdout.write(String(overlaps));
`,
    );
    // Bundled once (plain node starts in a fraction of tsx's time), from the sources under test.
    const worker = join(s.dir, 'lock-worker.mjs');
    await build({ entryPoints: [source], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: worker, logLevel: 'warning' });
    const outs = await Promise.all(Array.from({ length: LOCK_PROCS }, () => execa(process.execPath, [worker, dir, String(LOCK_ITERS)])));
    expect(outs.map((o) => Number(o.stdout))).toEqual(Array(LOCK_PROCS).fill(0));
    expect(await readdir(dir)).toEqual([]);
  });
});
