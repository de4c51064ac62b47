// The call's own log line ("CNI call done" / "CNI call failed") from the single executable, started from its
// startup snapshot, run as a runtime runs it (scrubbed environment) inside a scratch netns standing for the node,
// with a pod netns of its own as CNI_NETNS (reference plugins on libcni >= 1.2's skel refuse their own netns as the
// pod's, code 8), over the reference host-local: `ms` is the whole call (process start → the line), the `timings` split is beside it on every verb
// and on errors, and both count from this process's start (not from the snapshot's build, not from before the
// parent started the process): checked against the wall time and the wall clock the parent measured around it.
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { PLUGIN_DIR, SEA_SHIM } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { ErrorCode } from '../../src/cni/errors.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();
const SEA = SEA_SHIM;
/** Where the shim logs when the config does not parse (src/plugin.ts). */
const DEFAULT_LOG = '/var/log/ipam-shim.log';

type Line = {
  msg: string;
  time: string;
  ms: number;
  command: string;
  containerID?: string;
  code?: number;
  timings?: Record<string, number>;
  cpu?: Record<string, number>;
};

/** The netns the plugin runs in (the node's) and the pod's, which a runtime never makes the same. */
interface Namespaces {
  node: string;
  pod: string;
}
const namespaces = async (): Promise<Namespaces> => ({ node: await net.netns('cl'), pod: await net.netns('clpod') });

/** One call of the executable in the node netns, with the parent's wall time around it and its wall clock just before. */
async function call({ node: ns, pod }: Namespaces, command: string, containerID: string, conf: unknown) {
  const env = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerID,
    CNI_NETNS: `/run/netns/${pod}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: PLUGIN_DIR,
  };
  const input = typeof conf === 'string' ? conf : JSON.stringify(conf);
  const spawnedAt = Date.now();
  const t0 = performance.now();
  const r = await execa('ip', ['netns', 'exec', ns, SEA], { input, env, extendEnv: false, reject: false, timeout: 60_000 });
  return { exitCode: r.exitCode, stdout: r.stdout, wallMs: performance.now() - t0, spawnedAt };
}

/** The call's own line: the last "CNI call …" line of this command (and container, for verbs that have one). */
async function callLine(logFile: string, command: string, containerID?: string): Promise<Line> {
  const lines = (await readFile(logFile, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
  const line = lines
    .filter((l) => l.command === command && (containerID === undefined || l.containerID === containerID) && l.msg.startsWith('CNI call '))
    .at(-1);
  expect(line, `${command} ${containerID} in ${logFile}`).toBeDefined();
  return line!;
}

/** `ms` is the whole call: process start → the line, = timings.total, within what the parent saw. */
function expectWholeCall(line: Line, c: { wallMs: number; spawnedAt: number }) {
  const t = line.timings!;
  expect(t, JSON.stringify(line)).toBeDefined();
  expect(Math.abs(line.ms - t.total!)).toBeLessThanOrEqual(1);
  expect(line.ms).toBeGreaterThanOrEqual(t.boot!);
  expect(line.ms).toBeLessThanOrEqual(c.wallMs);
  // Where the line says the process started (its wall clock minus ms; `time` has ms resolution): not before the
  // parent started it. An origin at the snapshot's build, or any other process's start, would be far earlier.
  expect(Date.parse(line.time) - line.ms).toBeGreaterThanOrEqual(c.spawnedAt - 1.1);
  for (const [span, ms] of Object.entries(t)) expect(ms, span).toBeLessThanOrEqual(t.total!);
  // Its own CPU beside it: Node's start-up and the snapshot (boot) before any of ours, the rest after.
  const cpu = line.cpu!;
  expect(cpu, JSON.stringify(line)).toBeDefined();
  expect(cpu.boot).toBeGreaterThan(0);
  expect(cpu.total).toBeGreaterThanOrEqual(cpu.boot!);
  if (cpu.verb !== undefined) expect(cpu.boot! + cpu.init! + cpu.verb).toBeCloseTo(cpu.total!, 0);
}

describe.runIf(root)('the call log line of the single executable', () => {
  const conf = () => shimConf({ name: 'calllog', dirs: s, delegate: hostLocal(s.dataDir, '10.93.0.0/24') });

  it('ADD and DEL: ms is the whole call, with the split beside it (DEL: the delegate and ledger steps)', async () => {
    const ns = await namespaces();
    const cid = `cl-${uid()}`;
    const added = await call(ns, 'ADD', cid, conf());
    expect(added.exitCode, added.stdout).toBe(0);
    const add = await callLine(s.logFile, 'ADD', cid);
    expect(add).toMatchObject({ msg: 'CNI call done', outcome: 'ok' });
    expectWholeCall(add, added);
    expect(Object.keys(add.cpu!)).toEqual(['boot', 'init', 'verb', 'total']);
    expect(Object.keys(add.timings!)).toEqual(
      expect.arrayContaining([
        'boot',
        'modules',
        'config',
        'logger',
        'delegate.version',
        'delegate.add',
        'ledger.lock',
        'ledger.write',
        'verb',
        'total',
      ]),
    );

    const deleted = await call(ns, 'DEL', cid, { ...conf(), prevResult: JSON.parse(added.stdout) });
    expect(deleted.exitCode, deleted.stdout).toBe(0);
    const del = await callLine(s.logFile, 'DEL', cid);
    expect(del).toMatchObject({ msg: 'CNI call done', outcome: 'ok' });
    expect(Object.keys(del.timings!)).toEqual(
      expect.arrayContaining([
        'boot',
        'modules',
        'config',
        'logger',
        'ledger.lock',
        'delegate.version',
        'delegate.del',
        'ledger.remove',
        'verb',
        'total',
      ]),
    );
    expect(del.timings!['delegate.del']).toBeGreaterThan(0);
    expectWholeCall(del, deleted);
  });

  it('CHECK, STATUS and GC log ms and the split too, with their delegate calls', async () => {
    const ns = await namespaces();
    const cid = `cl-${uid()}`;
    const conf11 = { ...conf(), cniVersion: '1.1.0' };
    const versions = await execa(`${PLUGIN_DIR}/host-local`, { env: { CNI_COMMAND: 'VERSION' }, input: '{"cniVersion":"0.3.1"}' });
    const delegateSpeaks11 = (JSON.parse(versions.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.1.0');
    const added = await call(ns, 'ADD', cid, conf11);
    expect(added.exitCode, added.stdout).toBe(0);
    const calls: Array<[string, Record<string, unknown>, string[]]> = [
      ['CHECK', { prevResult: JSON.parse(added.stdout) }, ['ledger.lock', 'delegate.version', 'delegate.check']],
      // STATUS goes to a delegate that speaks 1.1.0 (host-local 1.9); 1.1.1's has no STATUS of its own to ask
      ['STATUS', {}, ['delegate.version', ...(delegateSpeaks11 ? ['delegate.status'] : [])]],
      ['GC', { 'cni.dev/valid-attachments': [{ containerID: cid, ifname: 'eth0' }] }, []],
    ];
    for (const [command, extra, spans] of calls) {
      const c = await call(ns, command, cid, { ...conf11, ...extra });
      expect(c.exitCode, `${command}: ${c.stdout}`).toBe(0);
      const line = await callLine(s.logFile, command, command === 'CHECK' ? cid : undefined); // STATUS, GC: no container
      expect(line).toMatchObject({ msg: 'CNI call done', outcome: 'ok' });
      expect(Object.keys(line.timings!)).toEqual(expect.arrayContaining(['boot', 'modules', 'config', 'logger', ...spans, 'verb', 'total']));
      expectWholeCall(line, c);
    }
  });

  it('a failed call (a bad reservedCIDRs list) logs ms and timings too', async () => {
    const ns = await namespaces();
    const cid = `cl-${uid()}`;
    const bad = shimConf({ name: 'calllog', dirs: s, delegate: hostLocal(s.dataDir, '10.93.0.0/24'), keys: { reservedCIDRs: ['10.1.0.0/33'] } });
    const failed = await call(ns, 'ADD', cid, bad);
    expect(failed.exitCode).not.toBe(0);
    expect(JSON.parse(failed.stdout)).toMatchObject({ code: ErrorCode.InvalidNetworkConfig, msg: 'invalid reservedCIDRs' });
    const line = await callLine(s.logFile, 'ADD', cid);
    expect(line).toMatchObject({ msg: 'CNI call failed', outcome: 'error', code: ErrorCode.InvalidNetworkConfig });
    expect(Object.keys(line.timings!)).toEqual(expect.arrayContaining(['boot', 'modules', 'config', 'logger', 'verb', 'total']));
    expectWholeCall(line, failed);
  });

  it('a call whose config does not parse logs ms and timings to the default log, without a verb', async () => {
    const ns = await namespaces();
    const cid = `cl-${uid()}`;
    const failed = await call(ns, 'DEL', cid, '{"cniVersion": ');
    expect(JSON.parse(failed.stdout)).toMatchObject({ code: ErrorCode.DecodingFailure });
    const line = await callLine(DEFAULT_LOG, 'DEL', cid);
    expect(line).toMatchObject({ msg: 'CNI call failed', outcome: 'error', code: ErrorCode.DecodingFailure });
    expect(Object.keys(line.timings!).sort()).toEqual(['boot', 'config', 'logger', 'modules', 'total']);
    expect(Object.keys(line.cpu!)).toEqual(['boot', 'total']);
    expectWholeCall(line, failed);
  });
});
