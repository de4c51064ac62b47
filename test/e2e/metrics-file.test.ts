// `metricsFile` that is no regular file of its own, from the BUILT single executable (issue 45, finding 1): a FIFO
// there hung ADD, DEL and STATUS (a STATUS that never returns makes a containerd 2.x node NotReady); a symlink to
// /dev/zero cost each call 673 MiB, a sparse file 585 MiB. Each call must answer as usual within a bound, leave the
// path as it found it, say why once on its log, and peak near a normal call's memory.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, SEA_SHIM, invoke } from '../support/shim/cni.js';
import { peakRssOfDel } from '../support/shim/rss.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();

/** Reference plugins that speak 1.1.0 (STATUS), as in status.test.ts. */
const PLUGINS_11 = process.env.CNI_PLUGIN_DIR_11 ?? join(ROOT, '.deps/cni-plugins-1.9');
/** What a call may take when its metrics file cannot be used: the shim's ~50 ms, with room for a loaded machine. */
const CALL_BOUND_MS = 5_000;
/** A call's peak RSS may exceed a normal call's by this much (reading /dev/zero or a sparse file cost 585–673 MiB). */
const RSS_SLACK_KB = 48 * 1024;
const POD_ARGS =
  'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11';

const parseLines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

(root && existsSync(join(PLUGINS_11, 'host-local')) ? describe : describe.skip)('a metricsFile that is not a regular file', () => {
  /** STATUS, ADD, DEL of the shim in ptp's IPAM slot writing metrics to `metricsFile`, each killed after CALL_BOUND_MS. */
  async function calls(metricsFile: string) {
    const node = await net.netns('node');
    const pod = await net.netns('pod');
    const name = `mf${uid()}`;
    const conf = shimConf({
      cniVersion: '1.1.0',
      name,
      dirs: s,
      probeRewrite: false,
      delegate: hostLocal(s.dataDir, '10.93.0.0/24'),
      keys: { metricsFile },
    });
    const ipamConf = { cniVersion: '1.1.0', name, ipam: conf.ipam, type: 'ptp' };
    const attachment = { containerID: 'c-pod', ifname: 'eth0', netns: `/run/netns/${pod}`, args: POD_ARGS };
    const call = async (command: string) => {
      const started = performance.now();
      const r = await invoke(ipamConf, {
        command,
        ...(command === 'STATUS' ? {} : attachment),
        inNetns: node,
        bin: SEA_SHIM,
        path: [PLUGINS_11],
        timeoutMs: CALL_BOUND_MS,
      });
      return { ...r, ms: Math.round(performance.now() - started) };
    };
    return { status: await call('STATUS'), add: await call('ADD'), del: await call('DEL') };
  }

  /** Each call answered as usual within the bound; the log says once per call why the metrics were not written. */
  async function expectAnswered(out: Awaited<ReturnType<typeof calls>>, metricsFile: string, why: RegExp) {
    expect(out.status.exitCode, `STATUS after ${out.status.ms} ms: ${out.status.stdout}`).toBe(0);
    expect(out.add.exitCode, `ADD after ${out.add.ms} ms: ${out.add.stdout}`).toBe(0);
    expect(out.add.json.ips).toHaveLength(1);
    expect(out.del.exitCode, `DEL after ${out.del.ms} ms: ${out.del.stdout}`).toBe(0);
    for (const o of [out.status, out.add, out.del]) expect(o.ms).toBeLessThan(CALL_BOUND_MS);
    const skipped = parseLines(await readFile(s.logFile, 'utf8')).filter((l) => l.msg === 'metrics not written (the CNI outcome is unaffected)');
    expect(skipped.map((l) => l.command)).toEqual(['STATUS', 'ADD', 'DEL']);
    for (const l of skipped) {
      expect(l.metricsFile).toBe(metricsFile);
      expect(l.err.message).toMatch(why);
    }
  }

  it('a FIFO with no writer: STATUS, ADD and DEL answer as usual within 5 s; the FIFO stays', async () => {
    const metricsFile = join(s.dir, 'metrics', 'ipam-shim.prom');
    await mkdir(join(s.dir, 'metrics'));
    await execa('mkfifo', [metricsFile]);
    await expectAnswered(await calls(metricsFile), metricsFile, /is not a regular file \(a FIFO\)/);
    expect((await stat(metricsFile)).isFIFO()).toBe(true);
  });

  it('a symlink to /dev/zero and a sparse 4 GiB file: answered, left as they are, each call peaking near a normal one', async () => {
    const dir = join(s.dir, 'metrics');
    await mkdir(dir);
    const zero = join(dir, 'zero.prom');
    await symlink('/dev/zero', zero);
    const sparse = join(dir, 'sparse.prom');
    await writeFile(sparse, '');
    await truncate(sparse, 4 * 1024 ** 3);
    await expectAnswered(await calls(zero), zero, /is a symlink/);
    expect((await lstat(zero)).isSymbolicLink()).toBe(true);
    await rm(s.logFile);
    await expectAnswered(await calls(sparse), sparse, /is 4294967296 bytes, over the 1048576-byte bound/);
    expect((await stat(sparse)).size).toBe(4 * 1024 ** 3);

    const normal = await peakRssKb(join(dir, 'normal.prom'));
    const viaZero = await peakRssKb(zero);
    const viaSparse = await peakRssKb(sparse);
    console.log(`peak RSS of a DEL: normal ${normal} KiB, /dev/zero link ${viaZero} KiB, sparse ${viaSparse} KiB`);
    expect(viaZero).toBeLessThan(normal + RSS_SLACK_KB);
    expect(viaSparse).toBeLessThan(normal + RSS_SLACK_KB);
  });
});

/** The peak RSS (KiB) of a DEL writing metrics to `metricsFile` (test/support/shim/rss.ts). */
function peakRssKb(metricsFile: string): Promise<number> {
  const conf = shimConf({
    name: `mr${uid()}`,
    dirs: s,
    placement: 'chained',
    probeRewrite: false,
    delegate: { type: 'host-local' },
    keys: { metricsFile },
  });
  return peakRssOfDel(conf, POD_ARGS, CALL_BOUND_MS);
}
