// Node readiness through containerd 2.x's CRI: with a 1.1.0 list, every CRI Status call (kubelet's 5 s poll) runs
// STATUS on every plugin of the list, and a failure is NetworkReady=false, a NotReady node. The shim's STATUS
// (src/verbs/status.ts, src/status/decide.ts) through the real path, on the reference plugins 1.9 (they speak
// 1.1.0; Debian 12's 1.1.1 refuse a 1.1.0 list): ready in both placements; not ready with the shim's message
// when the state dir is read-only or the delegate is gone, ready again once fixed; a hung delegate cannot hold
// the CRI Status call; a blip is tolerated, a lasting failure is not; and containerd 2.x never sends GC.
// cilium-cni's place holds the stand-in of the newer Cilium line (1.1.0, STATUS: code 50 while cilium-agent is
// down), whatever CILIUM_LINE says: 1.17 refuses a 1.1.0 list, which the last test shows is a NotReady node.
// Needs containerd 2.x whatever CONTAINERD_BIN_DIR says (containerd 1.6/1.7 never send STATUS): the one
// install-deps publishes at .deps/containerd-2 (or CONTAINERD_BIN_DIR when that names a 2.x): it runs in both of
// CI's CRI passes, on 2.x each time.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_BIN, ROOT } from '../support/shim/cni.js';
import { unmountBelow } from '../support/runtimes/mounts.js';
import { containerdBuild, missingTools } from '../support/runtimes/cri/containerd.js';
import { CNI_LOGGER, hostLocal, type Placement, PLACEMENTS } from '../support/runtimes/cri/conflists.js';
import type { CriBedDirs } from '../support/runtimes/cri/bed.js';
import type { RuntimeCondition } from '../support/runtimes/cri/client.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';
import { ciliumCni } from '../support/shim/cilium.js';

const is2x = (dir: string) => missingTools(dir).length === 0 && containerdBuild(dir).major >= 2;
/** CONTAINERD_BIN_DIR when it names a 2.x (CI's containerd-2 pass), else the 2.x install-deps publishes. */
const CONTAINERD2 =
  process.env.CONTAINERD_BIN_DIR && is2x(path.resolve(process.env.CONTAINERD_BIN_DIR))
    ? path.resolve(process.env.CONTAINERD_BIN_DIR)
    : path.join(ROOT, '.deps/containerd-2');
const PLUGINS_11 = path.resolve(process.env.CNI_PLUGIN_DIR_11 ?? path.join(ROOT, '.deps/cni-plugins-1.9'));
const have2 = is2x(CONTAINERD2) && existsSync(path.join(PLUGINS_11, 'host-local'));
if (!have2 && process.env.CI === 'true')
  throw new Error(`CI must have containerd 2.x in ${CONTAINERD2} and reference plugins 1.9 in ${PLUGINS_11} (scripts/install-deps.sh)`);
if (!have2)
  console.warn(`skipping: no containerd 2.x in ${CONTAINERD2} or no reference plugins that speak 1.1.0 in ${PLUGINS_11} (scripts/install-deps.sh)`);
const enabled = have2 && criOrSkip();

const RANGES = [[{ subnet: '10.98.0.0/24' }]];
const STATUS_IPAM = { 'status-ipam': path.join(FIXTURE_BIN, 'status-ipam') };

interface Call {
  command: string;
  containerID: string;
  netns: string;
  cniVersion: string;
  prevResultIPs: string[] | null;
  args: string;
}

describe.skipIf(!enabled)('containerd 2.x CRI Status ← ipam-shim STATUS (1.1.0 list)', () => {
  const s = useCriBed({
    containerdBinDir: CONTAINERD2,
    pluginDir: PLUGINS_11,
    plugins: { ...CNI_LOGGER, ...STATUS_IPAM },
    cilium: 'newer',
    confList: (dirs) => list(dirs, 'chained'),
  });
  const modeFile = () => path.join(s.bed.baseDir, 'status-mode');
  const loggerLog = () => path.join(s.bed.baseDir, 'calls.jsonl');

  /**
   * cilium-cni (newer) first; the shim's delegate is status-ipam over host-local (STATUS steered by a file);
   * the recording plugin last. `shim`: extra shim settings.
   */
  function list(dirs: CriBedDirs, placement: Placement, shim: Record<string, unknown> = {}): Record<string, unknown> {
    const delegate = { ...hostLocal(dirs, RANGES), type: 'status-ipam', statusModeFile: path.join(dirs.baseDir, 'status-mode') };
    const own = { stateDir: dirs.stateDir, logFile: dirs.logFile, ipv6ProbeRewrite: 'off', delegate, ...shim };
    const plugins =
      placement === 'chained' ? [ciliumCni(hostLocal(dirs, RANGES)), { type: 'ipam-shim', ...own }] : [ciliumCni({ type: 'ipam-shim', ...own })];
    return {
      cniVersion: '1.1.0',
      name: dirs.network,
      plugins: [...plugins, { type: 'cni-logger', logFile: path.join(dirs.baseDir, 'calls.jsonl') }],
    };
  }
  const use = (placement: Placement, shim: Record<string, unknown> = {}) => s.bed.setConfList(list(s.bed, placement, shim));
  const mode = (m: string) => writeFile(modeFile(), `${m}\n`);

  /** One CRI Status call, as kubelet makes it: NetworkReady and how long containerd took to answer. */
  async function networkReady(): Promise<RuntimeCondition & { ms: number }> {
    const started = performance.now();
    const conditions = await s.bed.cri.status();
    const ms = performance.now() - started;
    const c = conditions.find((x) => x.type === 'NetworkReady');
    if (!c) throw new Error(`no NetworkReady condition: ${JSON.stringify(conditions)}`);
    return { ...c, ms };
  }
  const calls = async (): Promise<Call[]> =>
    (await readFile(loggerLog(), 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Call);
  const shimStatusLines = async () =>
    (await readFile(s.bed.logFile, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((l) => l.command === 'STATUS');

  beforeAll(() => {
    // The point of this file: a 2.x that sends STATUS.
    expect(s.bed.containerd.major).toBeGreaterThanOrEqual(2);
  });
  afterEach(async () => {
    await unmountBelow(s.bed.stateDir);
    await mode('pass');
    const bin = path.join(s.bed.binDir, 'status-ipam');
    if (existsSync(`${bin}.gone`)) await rename(`${bin}.gone`, bin);
  });

  it.each(PLACEMENTS)(
    '%s: NetworkReady on a healthy node; every CRI Status ran STATUS through the whole list, the shim and its delegate included',
    async (placement) => {
      await use(placement);
      await mode('pass');
      await rm(`${modeFile()}.calls`, { force: true });
      const before = (await calls()).filter((c) => c.command === 'STATUS').length;
      const shimBefore = (await shimStatusLines()).length;
      for (let i = 0; i < 3; i++) expect(await networkReady()).toMatchObject({ status: true });
      const status = (await calls()).filter((c) => c.command === 'STATUS');
      expect(status.length - before).toBe(3);
      expect(status.every((c) => c.cniVersion === '1.1.0' && c.containerID === '' && c.netns === '')).toBe(true);
      const shim = (await shimStatusLines()).slice(shimBefore);
      expect(shim.map((l) => l.msg)).toEqual(['CNI call done', 'CNI call done', 'CNI call done']);
      // In the slot the shim asks its delegate; chained, cilium-cni asks the IPAM it delegates to and the shim does not
      // again.
      expect(shim.map((l) => 'delegate.status' in l.timings)).toEqual([true, true, true].map(() => placement === 'ipam'));
      const delegateStatus = (await readFile(`${modeFile()}.calls`, 'utf8').catch(() => '')).split('\n').filter(Boolean);
      expect(delegateStatus.length).toBe(placement === 'ipam' ? 3 : 0);
      // A pod starts in this placement (STATUS said so; ADD agrees).
      const pod = await s.bed.runPod(`ready-${placement}`);
      expect(pod.ips[0]).toMatch(/^10\.98\.0\.\d+$/);
      await s.bed.removePod(pod.id);
    },
  );

  it.each(PLACEMENTS)("%s: state dir read-only → NotReady with the shim's message; writable again → Ready", async (placement) => {
    await use(placement);
    expect(await networkReady()).toMatchObject({ status: true });
    await mkdir(s.bed.stateDir, { recursive: true, mode: 0o700 }); // there on a node; a shim that never wrote it must still fail below
    await execa('mount', ['--bind', s.bed.stateDir, s.bed.stateDir]);
    await execa('mount', ['-o', 'remount,bind,ro', s.bed.stateDir]);
    const ro = await networkReady();
    expect(ro.status).toBe(false);
    expect(ro.reason).toBe('NetworkPluginNotReady');
    expect(ro.message).toContain(`state dir ${s.bed.stateDir} is not writable`);
    expect(ro.message).toContain('EROFS');
    await execa('mount', ['-o', 'remount,bind,rw', s.bed.stateDir]);
    expect(await networkReady()).toMatchObject({ status: true });
  });

  it.each(PLACEMENTS)('%s: delegate gone from the CNI bin dir → NotReady naming it; back → Ready', async (placement) => {
    await use(placement);
    expect(await networkReady()).toMatchObject({ status: true });
    const bin = path.join(s.bed.binDir, 'status-ipam');
    await rename(bin, `${bin}.gone`);
    const gone = await networkReady();
    expect(gone.status).toBe(false);
    expect(gone.message).toContain('delegate status-ipam is not available');
    expect(gone.message).toContain('failed to find delegate plugin "status-ipam"');
    await rename(`${bin}.gone`, bin);
    expect(await networkReady()).toMatchObject({ status: true });
  });

  it('a delegate STATUS that hangs cannot hold CRI Status: answered within statusTimeoutMs, tolerated, then NotReady saying what the shim concluded', async () => {
    await use('ipam', { statusGraceMs: 4_000 });
    expect(await networkReady()).toMatchObject({ status: true });
    await mode('hang');
    const t0 = Date.now();
    const first = await networkReady();
    // Tolerated: one slow delegate does not take the node out. Bounded: 1 s (statusTimeoutMs) + the shim's start.
    expect(first.status).toBe(true);
    expect(first.ms).toBeGreaterThanOrEqual(1_000);
    expect(first.ms).toBeLessThan(2_500);
    const latencies = [first.ms];
    // Polled until the node goes NotReady (not for a fixed time: under load the poll that crosses the grace can start
    // just before it and be tolerated); it must not go before statusGraceMs has passed since the first hung STATUS.
    let last = first;
    while (last.status && Date.now() - t0 < 12_000) {
      last = await networkReady();
      latencies.push(last.ms);
    }
    expect(last.status).toBe(false);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4_000);
    expect(last.message).toMatch(/delegate status-ipam STATUS did not answer within 1000 ms \(failing for \d+ s, past statusGraceMs 4000 ms\)/);
    expect(Math.max(...latencies)).toBeLessThan(2_500);
    console.log(`CRI Status latency with a hung delegate STATUS (ms): ${latencies.map((x) => x.toFixed(0)).join(', ')}`);
    await mode('pass');
    expect(await networkReady()).toMatchObject({ status: true });
  });

  it('a blip does not flap the node (a crash, a "try again later"); a delegate that says it is down does, at once', async () => {
    await use('ipam');
    expect(await networkReady()).toMatchObject({ status: true });
    const seen = (await shimStatusLines()).length;
    for (const m of ['crash', 'again']) {
      await mode(m);
      expect(await networkReady(), m).toMatchObject({ status: true });
      await mode('pass');
      expect(await networkReady(), `${m}, then pass`).toMatchObject({ status: true });
    }
    const tolerated = (await shimStatusLines()).slice(seen).filter((l) => String(l.msg).startsWith('STATUS: delegate did not answer; tolerated'));
    expect(tolerated.map((l) => l.cniMsg)).toEqual([
      'delegate status-ipam STATUS did not answer',
      'delegate status-ipam STATUS asked to try again later',
    ]);
    await mode('down');
    const down = await networkReady();
    expect(down.status).toBe(false);
    expect(down.message).toContain('status-ipam: the address service is down');
  });

  it('containerd 2.x never sends GC: not over pods coming and going, not across a restart with a pod running', async () => {
    await use('chained');
    const pod = await s.bed.runPod('gc-watch');
    const gone = await s.bed.runPod('gc-gone');
    expect(await s.bed.cachedResults()).toEqual([`${s.bed.network}-${gone.id}-eth0`, `${s.bed.network}-${pod.id}-eth0`].sort());
    await s.bed.removePod(gone.id);
    // What a 1.1.0 list gets on a pod's life (docs/runtimes.md): as at 1.0.0 on 1.6 and 2.x.
    const life = (await calls()).filter((c) => c.containerID === gone.id);
    expect(life.map((c) => c.command)).toEqual(['ADD', 'DEL', 'DEL']);
    expect(life.every((c) => c.cniVersion === '1.1.0')).toBe(true);
    expect(life[1]).toMatchObject({ netns: gone.netnsPath, prevResultIPs: [`${gone.ips[0]}/32`] });
    expect(life[2]).toMatchObject({ netns: '', prevResultIPs: null });
    const args = Object.fromEntries(life[0]!.args.split(';').map((kv) => kv.split('=') as [string, string]));
    expect(args).toEqual({
      K8S_POD_NAMESPACE: 'default',
      K8S_POD_NAME: 'gc-gone',
      K8S_POD_INFRA_CONTAINER_ID: gone.id,
      K8S_POD_UID: gone.status.metadata.uid,
      IgnoreUnknown: '1',
    });
    await s.bed.restart();
    await networkReady();
    await s.bed.removePod(pod.id);
    await s.bed.restart();
    await networkReady();
    const commands = new Set((await calls()).map((c) => c.command));
    expect(commands.has('ADD') && commands.has('DEL') && commands.has('STATUS')).toBe(true);
    // A containerd that starts sending GC must be noticed: the shim's GC then runs on the runtime's valid list.
    expect(commands.has('GC')).toBe(false);
    expect([...commands].sort()).toEqual(['ADD', 'DEL', 'STATUS']);
  });

  it("cilium-agent down: NotReady with cilium-cni's own STATUS error (DaemonDown), the shim never asked; up again: Ready", async () => {
    await use('chained');
    expect(await networkReady()).toMatchObject({ status: true });
    const shimBefore = (await shimStatusLines()).length;
    await s.bed.ciliumAgent!.down();
    try {
      const down = await networkReady();
      expect(down.status).toBe(false);
      // containerd's condition carries cilium-cni's msg and details (libcni adds no plugin name to STATUS errors).
      expect(down.message).toContain('DaemonDown; unable to connect to Cilium agent: failed to create cilium agent client after');
      // libcni stops at the first plugin that fails STATUS: the shim behind it is not run.
      expect((await shimStatusLines()).length).toBe(shimBefore);
    } finally {
      await s.bed.ciliumAgent!.up();
    }
    expect(await networkReady()).toMatchObject({ status: true });
  });

  it('the 1.17 line in front of a 1.1.0 list: cilium-cni refuses STATUS, so the node is NotReady, and every pod fails', async () => {
    await use('chained');
    await s.bed.useCiliumLine('1.17');
    try {
      const refused = await networkReady();
      expect(refused.status).toBe(false);
      expect(refused.message).toContain('plugin version does not allow STATUS');
      const err = await s.bed.runPod('refused').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(String((err as Error | undefined)?.message)).toContain('incompatible CNI versions');
    } finally {
      await s.bed.useCiliumLine('newer');
      await s.bed.removeAllPods();
    }
    expect(await networkReady()).toMatchObject({ status: true });
  });
});
