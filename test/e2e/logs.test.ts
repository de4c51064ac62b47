// The plugin's and the agent's logs as an operator reads them, from the BUILT single executable: named levels, the
// pod from CNI_ARGS on every call's line and in the ledger record, the log file's size bound under many
// concurrent calls (every line whole, none lost), a log path that is no regular file of its own (a FIFO, a symlink,
// a symlinked directory, a sparse file at the rotation lock),
// and the agent's persisting problem logged once, not every pass.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PLUGIN_DIR, ROOT, SEA_SHIM, invoke } from '../support/shim/cni.js';
import { peakRssOfDel } from '../support/shim/rss.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { ErrorCode } from '../../src/cni/errors.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];
const POD = { namespace: 'shop', name: 'web-7d9f8-x2x4q', uid: '0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11' };
const POD_ARGS = `IgnoreUnknown=1;K8S_POD_NAMESPACE=${POD.namespace};K8S_POD_NAME=${POD.name};K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=${POD.uid}`;

const parseLines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

(root ? describe : describe.skip)('the plugin log file', () => {
  it('names every level; the call lines and the ledger record carry the pod from CNI_ARGS', async () => {
    const node = await net.netns('node');
    const pod = await net.netns('pod');
    const name = `lg${uid()}`;
    const conf = shimConf({ name, dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.91.0.0/24') });
    // The shim called as the IPAM plugin (what ptp does), with the config ptp hands on: its `ipam` plus name/version.
    const ipamConf = { cniVersion: '1.0.0', name, ipam: conf.ipam, type: 'ptp' };
    const invokeIpam = (command: string) =>
      invoke(ipamConf, {
        command,
        containerID: 'c-pod',
        ifname: 'eth0',
        netns: `/run/netns/${pod}`,
        args: POD_ARGS,
        inNetns: node,
        bin: SEA_SHIM,
        path: [PLUGIN_DIR],
      });
    const add = await invokeIpam('ADD');
    expect(add.exitCode, add.stdout).toBe(0);
    const record = JSON.parse(await readFile(join(s.stateDir, name, 'records', 'c-pod:eth0.json'), 'utf8'));
    expect(record.pod).toEqual(POD);
    expect(record.v).toBe(1);
    const del = await invokeIpam('DEL');
    expect(del.exitCode, del.stdout).toBe(0);

    const lines = parseLines(await readFile(s.logFile, 'utf8'));
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const l of lines) expect(LEVELS, JSON.stringify(l)).toContain(l.level);
    const done = lines.filter((l) => l.msg === 'CNI call done');
    expect(done.map((l) => l.command)).toEqual(['ADD', 'DEL']);
    // Every line of the call (the verb's own ones too), not only the last one.
    for (const l of lines) expect(l.pod, JSON.stringify(l)).toEqual(POD);
  });

  it('is bounded with rotated backups: no file past logMaxBytes; 48 concurrent calls leave every line whole and none lost', async () => {
    const name = `lr${uid()}`;
    const maxBytes = 8192;
    const backups = 12;
    const conf = {
      ...shimConf({ name, dirs: s, placement: 'chained', probeRewrite: false, delegate: { type: 'host-local' } }),
      logMaxBytes: maxBytes,
      logBackups: backups,
    };
    const ids = Array.from({ length: 48 }, (_, i) => `rot${i}-${uid()}`);
    // DEL of a chained attachment that was never recorded: a whole CNI call with nothing to undo, no namespace needed.
    const outs = await Promise.all(
      ids.map((containerID) => invoke(conf, { command: 'DEL', containerID, ifname: 'eth0', args: POD_ARGS, bin: SEA_SHIM, path: [PLUGIN_DIR] })),
    );
    for (const o of outs) expect(o.exitCode, o.stdout).toBe(0);

    const files = (await readdir(s.dir)).filter((f) => f.startsWith('shim.log'));
    const rotated = files.filter((f) => /^shim\.log\.\d+$/.test(f));
    expect(rotated.length, files.join(' ')).toBeGreaterThanOrEqual(2);
    expect(
      files.every((f) => f === 'shim.log' || /^shim\.log\.\d+$/.test(f)),
      `no lock left: ${files.join(' ')}`,
    ).toBe(true);
    expect(Math.max(...rotated.map((f) => Number(f.split('.').at(-1))))).toBeLessThanOrEqual(backups);
    const all: Record<string, any>[] = [];
    for (const f of files) {
      const text = await readFile(join(s.dir, f), 'utf8');
      expect(Buffer.byteLength(text), f).toBeLessThanOrEqual(maxBytes);
      expect(text.endsWith('\n'), f).toBe(true);
      // Each line parses on its own: a line interleaved with another, or cut, would not.
      all.push(...parseLines(text));
    }
    // A line the file could not take within the bound (its lock not had within 200 ms, on a loaded machine) is on
    // the call's stderr instead: still whole, still there.
    const onStderr = outs.flatMap((o) => parseLines(o.stderr));
    for (const id of ids) expect([...all, ...onStderr].filter((l) => l.containerID === id && l.msg === 'CNI call done').length, id).toBe(1);
    if (onStderr.length) console.log(`${onStderr.length} of ${all.length + onStderr.length} lines on stderr (the rotate lock not had in time)`);
  });
});

/** Reference plugins that speak 1.1.0 (STATUS), as in status.test.ts. */
const PLUGINS_11 = process.env.CNI_PLUGIN_DIR_11 ?? join(ROOT, '.deps/cni-plugins-1.9');
/** What a call may take when its log path cannot be used: the shim's ~50 ms, with room for a loaded machine. */
const CALL_BOUND_MS = 5_000;

(root && existsSync(join(PLUGINS_11, 'host-local')) ? describe : describe.skip)('a logFile that is not a regular file', () => {
  /** STATUS, ADD, DEL of the shim in ptp's IPAM slot logging to `logFile`, each killed after CALL_BOUND_MS. */
  async function calls(logFile: string) {
    const node = await net.netns('node');
    const pod = await net.netns('pod');
    const name = `lf${uid()}`;
    const conf = shimConf({
      cniVersion: '1.1.0',
      name,
      dirs: { stateDir: s.stateDir, logFile },
      probeRewrite: false,
      delegate: hostLocal(s.dataDir, '10.92.0.0/24'),
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
    const status = await call('STATUS');
    const add = await call('ADD');
    const del = await call('DEL');
    return { status, add, del };
  }

  /** Each call answered as usual within the bound; its lines, the reason first, are on its stderr. */
  function expectAnsweredWithLinesOnStderr(out: Awaited<ReturnType<typeof calls>>, logFile: string) {
    expect(out.status.exitCode, `STATUS after ${out.status.ms} ms: ${out.status.stdout}`).toBe(0);
    expect(out.status.stdout).toBe('');
    expect(out.add.exitCode, `ADD after ${out.add.ms} ms: ${out.add.stdout}`).toBe(0);
    expect(out.add.json.ips).toHaveLength(1);
    expect(out.del.exitCode, `DEL after ${out.del.ms} ms: ${out.del.stdout}`).toBe(0);
    for (const [command, o] of [
      ['STATUS', out.status],
      ['ADD', out.add],
      ['DEL', out.del],
    ] as const) {
      expect(o.ms, command).toBeLessThan(CALL_BOUND_MS);
      const lines = parseLines(o.stderr);
      expect(lines[0], o.stderr).toMatchObject({ level: 'warn', msg: 'log file not used: logging to stderr', logFile });
      expect(
        lines.filter((l) => l.msg === 'CNI call done').map((l) => l.command),
        o.stderr,
      ).toEqual([command]);
    }
  }

  it('a FIFO with no reader: STATUS, ADD and DEL answer as usual within 5 s, their lines on stderr', async () => {
    const logFile = join(s.dir, 'logs', 'shim.log');
    await mkdir(join(s.dir, 'logs'));
    await execa('mkfifo', [logFile]);
    const out = await calls(logFile);
    expectAnsweredWithLinesOnStderr(out, logFile);
    expect((await stat(logFile)).isFIFO()).toBe(true);
  });

  it('a symlink: the file it points to stays byte-identical; the calls succeed, their lines on stderr', async () => {
    const logFile = join(s.dir, 'logs', 'shim.log');
    const target = join(s.dir, 'elsewhere', 'private');
    await mkdir(join(s.dir, 'logs'));
    await mkdir(join(s.dir, 'elsewhere'));
    const before = Buffer.from('a file that is not the log\n');
    await writeFile(target, before, { mode: 0o600 });
    await chmod(target, 0o600);
    await symlink(target, logFile);
    const out = await calls(logFile);
    const after = await readFile(target);
    expect(after.equals(before), `${after.length} bytes: ${after.toString('utf8', 0, 300)}`).toBe(true);
    expect((await stat(target)).mode & 0o777).toBe(0o600);
    expectAnsweredWithLinesOnStderr(out, logFile);
  });

  it("a log directory that is a symlink: the victim directory's 0600 ipam.log stays byte-identical, no file made there", async () => {
    const victim = join(s.dir, 'victim');
    await mkdir(victim);
    const before = Buffer.from('a file that is not the log\n');
    await writeFile(join(victim, 'ipam.log'), before, { mode: 0o600 });
    await chmod(join(victim, 'ipam.log'), 0o600);
    await symlink(victim, join(s.dir, 'logs'));
    const logFile = join(s.dir, 'logs', 'ipam.log');
    const out = await calls(logFile);
    const after = await readFile(join(victim, 'ipam.log'));
    expect(after.equals(before), `${after.length} bytes: ${after.toString('utf8', 0, 300)}`).toBe(true);
    expect((await stat(join(victim, 'ipam.log'))).mode & 0o777).toBe(0o600);
    expect(await readdir(victim)).toEqual(['ipam.log']);
    expectAnsweredWithLinesOnStderr(out, logFile);
    expect(parseLines(out.add.stderr)[0]!.error.message).toMatch(/logs is a symlink/);
    // A new file would have been made there too: the directory without one gets none.
    await rm(join(victim, 'ipam.log'));
    await calls(logFile);
    expect(await readdir(victim)).toEqual([]);
  });

  it('a sparse 2 GiB file at the rotation lock: the calls answer, their lines on stderr, each peaking near a normal call', async () => {
    const logFile = join(s.dir, 'logs', 'shim.log');
    await mkdir(join(s.dir, 'logs'));
    const lock = `${logFile}.rotate.lock`;
    await writeFile(lock, '');
    await truncate(lock, 2 * 1024 ** 3);
    const out = await calls(logFile);
    for (const [command, o] of [
      ['STATUS', out.status],
      ['ADD', out.add],
      ['DEL', out.del],
    ] as const) {
      expect(o.exitCode, `${command} after ${o.ms} ms: ${o.stdout}`).toBe(0);
      expect(o.ms, command).toBeLessThan(CALL_BOUND_MS);
      // The lock is no holder's and not ours to remove: every line is refused by the file and kept on stderr.
      expect(
        parseLines(o.stderr)
          .filter((l) => l.msg === 'CNI call done')
          .map((l) => l.command),
        o.stderr,
      ).toEqual([command]);
    }
    expect((await stat(lock)).size).toBe(2 * 1024 ** 3);
    const rss = (logFile: string) =>
      peakRssOfDel(
        shimConf({
          name: `lk${uid()}`,
          dirs: { stateDir: s.stateDir, logFile },
          placement: 'chained',
          probeRewrite: false,
          delegate: { type: 'host-local' },
        }),
        POD_ARGS,
        CALL_BOUND_MS,
      );
    const normal = await rss(join(s.dir, 'normal.log'));
    const sparse = await rss(logFile);
    console.log(`peak RSS of a DEL: normal ${normal} KiB, sparse rotation lock ${sparse} KiB`);
    expect(sparse).toBeLessThan(normal + 48 * 1024);
  });
});

/** The agent in a netns of its own, on an empty conf dir (no conflist yet), passes every 0.2 s; `so()` is its stdout so far. */
async function startAgent() {
  const ns = await net.netns('agent');
  const confDir = join(s.dir, 'net.d');
  await mkdir(confDir);
  const proc = execa(
    'ip',
    [
      'netns',
      'exec',
      ns,
      SEA_SHIM,
      'agent',
      '--conf-dir',
      confDir,
      '--cache-dir',
      join(s.dir, 'cache'),
      '--no-install',
      '--interval',
      '0.2',
      '--jitter',
      '0',
    ],
    {
      reject: false,
    },
  );
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return { proc, confDir, so: () => out };
}

(root ? describe : describe.skip)('the agent log', () => {
  it('a conflist that stays missing is logged once when it starts and once at the end, not every pass', async () => {
    const { proc, so } = await startAgent();
    try {
      const deadline = Date.now() + 30_000;
      while (
        Date.now() < deadline &&
        so()
          .split('\n')
          .filter((l) => l.includes('"reconcile pass')).length < 6
      )
        await new Promise((r) => setTimeout(r, 200));
    } finally {
      proc.kill('SIGTERM');
    }
    const r = await proc;
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = parseLines(String(r.stdout));
    const passes = lines.filter((l) => String(l.msg).startsWith('reconcile pass'));
    expect(passes.length).toBeGreaterThanOrEqual(6);
    const failed = lines.filter((l) => l.step === 'network' && /failed/.test(String(l.msg)));
    expect(failed.length, JSON.stringify(failed)).toBe(1);
    expect(failed[0]!.level).toBe('error');
    for (const l of lines) expect(LEVELS, JSON.stringify(l)).toContain(l.level);
    expect(failed[0]!.error).toMatchObject({ code: ErrorCode.InvalidNetworkConfig });
    // No stack trace of the bundle on any line.
    expect(String(r.stdout)).not.toMatch(/"stack"/);
    const last = lines.at(-1)!;
    expect(last).toMatchObject({ msg: 'agent stopped', level: 'warn', problems: [{ step: 'network', passes: passes.length }] });
  });

  it('a conflist that appears later: the problem is logged when it starts and once more when it ends', async () => {
    const { proc, confDir, so } = await startAgent();
    const until = async (what: (text: string) => boolean) => {
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline && !what(so())) await new Promise((r) => setTimeout(r, 100));
    };
    try {
      await until((t) => t.split('\n').filter((l) => l.includes('"reconcile pass')).length >= 3);
      const list = {
        cniVersion: '1.0.0',
        name: 'late',
        plugins: [
          { type: 'ptp', ipam: { type: 'host-local', subnet: '10.93.0.0/24' } },
          { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, ipv6ProbeRewrite: 'off' },
        ],
      };
      await writeFile(join(confDir, '10-late.conflist'), JSON.stringify(list));
      await until((t) => t.includes('network: recovered'));
    } finally {
      proc.kill('SIGTERM');
    }
    const r = await proc;
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = parseLines(String(r.stdout));
    expect(lines.filter((l) => l.step === 'network' && l.level === 'error')).toHaveLength(1);
    const recovered = lines.filter((l) => l.msg === 'network: recovered');
    expect(recovered).toHaveLength(1);
    expect(recovered[0]).toMatchObject({ level: 'info', step: 'network', passes: expect.any(Number) });
    expect(recovered[0]!.passes).toBeGreaterThanOrEqual(3);
    expect(lines.at(-1)!.problems?.some((p: { step: string }) => p.step === 'network')).not.toBe(true);
  });
});
