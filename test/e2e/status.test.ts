// STATUS through the BUILT plugin, as containerd ≥ 2.0.1 sends it (1.1.0 list, every CRI Status = kubelet's 5 s
// poll): what it answers, within which bound, and how a delegate that does not answer is told from one that says
// it is unavailable (src/status/decide.ts). The delegate is test/fixtures/bin/status-ipam, steered through a
// file, over the real host-local of reference plugins that speak 1.1.0 (Debian unstable's 1.9, install-deps).
// Through containerd's CRI: test/cri/readiness.test.ts.
import { execa } from 'execa';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FIXTURE_BIN, invoke, ROOT, scratch } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { unmountBelow } from '../support/runtimes/mounts.js';
import { ErrorCode } from '../../src/cni/errors.js';

/** Reference plugins that speak 1.1.0 (Debian 12's 1.1.1 refuse a 1.1.0 config). */
const PLUGINS_11 = process.env.CNI_PLUGIN_DIR_11 ?? join(ROOT, '.deps/cni-plugins-1.9');
const have11 = existsSync(join(PLUGINS_11, 'host-local'));
if (!have11 && process.env.CI === 'true')
  throw new Error(`CI must have reference plugins that speak 1.1.0 in ${PLUGINS_11} (scripts/install-deps.sh)`);
if (!have11) console.warn(`skipping: no reference plugins that speak 1.1.0 in ${PLUGINS_11} (scripts/install-deps.sh)`);
const enabled = rootOrSkip() && have11;

let s: Awaited<ReturnType<typeof scratch>>;
let network: string;
let modeFile: string;
beforeEach(async () => {
  s = await scratch();
  network = `status-${uid()}`;
  modeFile = join(s.dir, 'status-mode');
});
afterEach(async () => {
  await unmountBelow(s.dir);
  // Nothing the hung delegates started may outlive a test.
  const pids = await readFile(`${modeFile}.pids`, 'utf8').catch(() => '');
  for (const pid of pids.split('\n').filter(Boolean)) expect(alive(Number(pid)), `delegate process ${pid} outlived its STATUS`).toBe(false);
  await s.cleanup();
});

/** A live process (a zombie holds nothing any more). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

const conf = (o: { placement?: 'ipam' | 'chained'; keys?: Record<string, unknown>; delegateType?: string } = {}) =>
  shimConf({
    cniVersion: '1.1.0',
    name: network,
    placement: o.placement,
    dirs: s,
    probeRewrite: false,
    delegate: { ...hostLocal(s.dataDir, '10.241.0.0/24'), type: o.delegateType ?? 'status-ipam', statusModeFile: modeFile },
    keys: o.keys,
  });
const status = async (c: Record<string, unknown> = conf()) => {
  const started = performance.now();
  const out = await invoke(c, { command: 'STATUS', path: [PLUGINS_11, FIXTURE_BIN] });
  return { ...out, ms: performance.now() - started };
};
const mode = (m: string) => writeFile(modeFile, `${m}\n`);
/** STATUS over a delegate whose STATUS hangs: 50 saying so, answered within `boundMs` plus the shim's start and exit. */
async function hungStatus(keys: Record<string, unknown>, boundMs: number) {
  await mode('hang');
  const out = await status(conf({ keys }));
  expect(out.json).toMatchObject({ code: ErrorCode.PluginNotAvailable, msg: `delegate status-ipam STATUS did not answer within ${boundMs} ms` });
  // ≈ 0.1 s of start and exit; generous for a loaded machine, far from 30 s (delegateTimeoutMs, the bound before).
  expect(out.ms).toBeLessThan(boundMs + 1_500);
  return out;
}
/** The modes the delegate's STATUS ran in, in order. */
const delegateCalls = async () =>
  (await readFile(`${modeFile}.calls`, 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ')[0]);
const logLines = async () =>
  (await readFile(s.logFile, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe.skipIf(!enabled)('STATUS through the built plugin', () => {
  it('IPAM slot: a healthy network answers 0 with nothing on stdout, after asking the delegate for its STATUS', async () => {
    const out = await status(conf({ placement: 'ipam' }));
    expect(out.exitCode, out.stdout).toBe(0);
    expect(out.stdout).toBe('');
    expect(await delegateCalls()).toEqual(['pass']);
  });

  it('chained: 0 without a delegate process (the plugin in front asks its IPAM itself); a missing delegate still fails', async () => {
    await mode('hang');
    const out = await status(conf({ placement: 'chained' }));
    expect(out.exitCode, out.stdout).toBe(0);
    expect(out.stdout).toBe('');
    expect(await delegateCalls()).toEqual([]);
    const gone = await status(conf({ placement: 'chained', delegateType: 'absent-ipam' }));
    expect(gone.json).toMatchObject({ code: ErrorCode.PluginNotAvailable, msg: 'delegate absent-ipam is not available' });
  });

  it('state dir not writable → 50 naming it and why, at once even right after a success; writable again → 0', async () => {
    expect((await status()).exitCode).toBe(0);
    await mkdir(s.stateDir, { recursive: true, mode: 0o700 });
    await execa('mount', ['--bind', s.stateDir, s.stateDir]);
    await execa('mount', ['-o', 'remount,bind,ro', s.stateDir]);
    const ro = await status();
    expect(ro.exitCode).toBe(1);
    expect(ro.json).toMatchObject({ code: ErrorCode.PluginNotAvailable, msg: `state dir ${s.stateDir} is not writable` });
    expect(ro.json.details).toMatch(/EROFS/);
    await execa('mount', ['-o', 'remount,bind,rw', s.stateDir]);
    const back = await status();
    expect(back.exitCode, back.stdout).toBe(0);
  });

  it('delegate missing → 50 naming it and where it was looked for, at once even right after a success', async () => {
    expect((await status()).exitCode).toBe(0);
    const out = await status(conf({ delegateType: 'absent-ipam' }));
    expect(out.json).toMatchObject({ code: ErrorCode.PluginNotAvailable, msg: 'delegate absent-ipam is not available' });
    expect(out.json.details).toContain('failed to find delegate plugin "absent-ipam"');
    expect(out.json.details).toContain(PLUGINS_11);
  });

  it('a delegate STATUS that hangs: the shim answers within statusTimeoutMs, says so, and kills the delegate', async () => {
    const out = await hungStatus({ statusTimeoutMs: 700, statusGraceMs: 0 }, 700);
    expect(out.ms).toBeGreaterThanOrEqual(700);
    expect(await delegateCalls()).toEqual(['hang']);
    // afterEach: both the delegate and its sleep are gone.
  });

  it('the default bound is 1 s', async () => {
    await hungStatus({ statusGraceMs: 0 }, 1_000);
  });

  it('a healthy network tolerates a delegate that does not answer (hang, crash, 11) for statusGraceMs, then reports it; a success ends the streak', async () => {
    // A grace long enough for three calls on a loaded 2-core machine (each one a process start plus a 300 ms bound:
    // 2.5 s was overrun at load ~20 in CI), short enough to wait out below.
    const GRACE = 8_000;
    const c = conf({ keys: { statusTimeoutMs: 300, statusGraceMs: GRACE } });
    expect((await status(c)).exitCode).toBe(0); // seen healthy
    const t0 = Date.now();
    const seen: Array<[string, number]> = [];
    // When the first failing call has returned: the streak's start is no later than this.
    let firstFailed = 0;
    for (const m of ['hang', 'crash', 'again']) {
      await mode(m);
      const out = await status(c);
      firstFailed ||= Date.now();
      seen.push([m, out.exitCode]);
    }
    expect(Date.now() - t0).toBeLessThan(GRACE); // still inside the grace (else the test proves nothing)
    expect(seen).toEqual([
      ['hang', 0],
      ['crash', 0],
      ['again', 0],
    ]);
    const tolerated = (await logLines()).filter((l) => l.msg.startsWith('STATUS: delegate did not answer; tolerated'));
    expect(tolerated.map((l) => l.cniMsg)).toEqual([
      'delegate status-ipam STATUS did not answer within 300 ms',
      'delegate status-ipam STATUS did not answer',
      'delegate status-ipam STATUS asked to try again later',
    ]);
    expect(tolerated.map((l) => l.details)).toEqual([
      'killed with its process group',
      'delegate status-ipam STATUS failed without a CNI error (exit 2); panic: status-ipam crashed on request',
      'status-ipam: busy, try again later',
    ]);
    // The grace runs from the first failure of the streak, not from the last one.
    await new Promise((r) => setTimeout(r, Math.max(0, firstFailed + GRACE + 100 - Date.now())));
    await mode('hang');
    const late = await status(c);
    expect(late.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
    expect(late.json.msg).toMatch(/^delegate status-ipam STATUS did not answer within 300 ms \(failing for \d+ s, past statusGraceMs 8000 ms\)$/);
    await mode('pass');
    expect((await status(c)).exitCode).toBe(0);
    expect((await logLines()).some((l) => l.msg === 'STATUS: available again')).toBe(true);
    // A new streak gets a new grace.
    await mode('hang');
    expect((await status(c)).exitCode).toBe(0);
  });

  it("the delegate's own 50 is answered at once, never tolerated", async () => {
    const c = conf({ keys: { statusGraceMs: 60_000 } });
    expect((await status(c)).exitCode).toBe(0);
    await mode('down');
    const out = await status(c);
    expect(out.json).toMatchObject({ code: ErrorCode.PluginNotAvailable, msg: 'status-ipam: the address service is down' });
  });

  it('no grace before the network was ever seen healthy: a fresh node whose delegate hangs reports it on the first STATUS', async () => {
    await hungStatus({ statusTimeoutMs: 300 }, 300); // default statusGraceMs: 15 s
  });

  it('a lasting warning (delegate ranges overlapping reservedCIDRs) is logged when it appears or changes, not on every STATUS', async () => {
    // 10.241.0.0/24 is the delegate's range: a /28 inside it leaves ADD most addresses, so STATUS answers 0 and warns.
    const overlapping = (cidr: string) => conf({ placement: 'chained', keys: { reservedCIDRs: [cidr] } });
    const warned = async () => (await logLines()).filter((l) => l.msg === 'delegate ranges overlap reserved CIDRs: some ADDs will be refused');
    for (let i = 0; i < 4; i++) expect((await status(overlapping('10.241.0.16/28'))).exitCode).toBe(0);
    expect(await warned()).toHaveLength(1);
    expect((await warned())[0]).toMatchObject({ level: 'warn', fix: 'reserved' });
    // Changed: logged again, once.
    for (let i = 0; i < 2; i++) expect((await status(overlapping('10.241.0.32/28'))).exitCode).toBe(0);
    expect(await warned()).toHaveLength(2);
    // Gone: said once; back: warned again.
    for (let i = 0; i < 2; i++) expect((await status(conf({ placement: 'chained' }))).exitCode).toBe(0);
    expect((await logLines()).filter((l) => l.msg === 'STATUS: the warnings logged before are gone')).toHaveLength(1);
    expect((await status(overlapping('10.241.0.32/28'))).exitCode).toBe(0);
    expect(await warned()).toHaveLength(3);
  });

  it('statusTimeoutMs and statusGraceMs are validated like every setting (code 7 naming the key)', async () => {
    for (const [key, value] of [
      ['statusTimeoutMs', 50],
      ['statusTimeoutMs', 5_000],
      ['statusGraceMs', -1],
      ['statusGraceMs', 'soon'],
    ] as const) {
      const out = await status(conf({ keys: { [key]: value } }));
      expect(out.json, `${key}=${value}`).toMatchObject({ code: ErrorCode.InvalidNetworkConfig });
      expect(out.json.details).toContain(key);
    }
  });
});
