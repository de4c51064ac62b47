// doctor's node checks (src/doctor/node.ts) against a real attachment and planted problems: a conflist made from
// the shipped chained example with the cilium-cni stand-in (the 1.17 line, which takes its 1.0.0; docs/testing.md,
// "The cilium-cni stand-in") in ptp's place, as on the Cilium nodes doctor is for, the built shim and Debian's
// host-local on CNI_PATH, a pod attached by the libcni-like runner inside a throwaway "node" namespace beside a
// cilium-agent API stand-in; then the files are broken one way at a time.
import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { chmod, mkdir, readdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openNetwork } from '../../src/contract/network-flags.js';
import { run } from '../../src/effects/exec.js';
import { NODE_CHECKS } from '../../src/doctor/node.js';
import type { Finding } from '../../src/contract/doctor-check.js';
import { CniRunner, type JsonObject } from '../support/runtimes/runner.js';
import { rootOrSkip } from '../support/net/netns.js';
import { shimKeys } from '../support/shim/conf.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT, SHIM, shimBinDir } from '../support/shim/cni.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const root = rootOrSkip();
const d = root ? describe : describe.skip;
const NAMES = new Set(NODE_CHECKS.map((c) => c.name));

const { s, net } = useScratchNet();
const ciliumAgent = useCiliumAgent();
/** cilium-cni's place on the CNI path: doctor asks it VERSION there (main-plugin), the runner runs it. */
const CILIUM_DIR = ciliumCniDir('1.17');
let confDir: string;
let bin: string;
let conflist: string;
let store: string;
let list: JsonObject;

/**
 * The shipped chained example (ptp + the shim over host-local) with cilium-cni in ptp's place, delegating to the same
 * host-local.
 */
async function chainedExample(): Promise<JsonObject> {
  const example = JSON.parse(await readFile(join(ROOT, 'conflist', 'generic-host-local-chained.conflist'), 'utf8')) as JsonObject;
  const [main, ...rest] = example.plugins as JsonObject[];
  return { ...example, plugins: [ciliumCni(main!.ipam as JsonObject), ...rest] };
}

/** The chained example on cilium-cni, localised to temp dirs, plus one pod attached through it. */
async function attachedNode(): Promise<{ node: string; ip: string }> {
  list = await chainedExample();
  for (const p of list.plugins as JsonObject[]) {
    const shim = p.type === 'ipam-shim' ? p : (p.ipam as JsonObject).type === 'ipam-shim' ? (p.ipam as JsonObject) : undefined;
    if (shim) Object.assign(shim, { stateDir: s.stateDir, logFile: s.logFile });
    const ipam = (shim ? shim.delegate : p.ipam) as JsonObject;
    ipam.dataDir = s.dataDir;
  }
  confDir = join(s.dir, 'net.d');
  await mkdir(confDir);
  conflist = join(confDir, '10-generic.conflist');
  await writeFile(conflist, JSON.stringify(list, null, 2));
  bin = await shimBinDir(s.dir);
  store = join(s.dataDir, String(list.name));
  const node = await net.netns('node');
  const pod = await net.netns('pod');
  const runner = new CniRunner({
    confList: list,
    pluginDirs: [CILIUM_DIR, bin, FIXTURE_BIN, PLUGIN_DIR],
    cacheDir: join(s.dir, 'cache'),
    netns: node,
    env: ciliumAgent.agent.env(),
  });
  const result: any = await runner.add('c1', `/run/netns/${pod}`);
  return { node, ip: String(result.ips[0].address).split('/')[0]! };
}

/** The node's CNI path: cilium-cni's dir, the shim's, Debian's plugins. */
const nodeCniPath = () => `${CILIUM_DIR}:${bin}:${PLUGIN_DIR}`;

async function findings(cniPath = nodeCniPath()): Promise<Finding[]> {
  const n = await openNetwork({ 'conf-dir': confDir, 'cni-path': cniPath }, run, process.env);
  return (await Promise.all(NODE_CHECKS.map((c) => c.run(n)))).flat();
}
const of = (fs: Finding[], check: string) => fs.filter((f) => f.check === check);
const bad = (fs: Finding[]) => fs.filter((f) => f.verdict === 'problem' || f.verdict === 'warn');

d('doctor node checks', () => {
  it('a healthy node: every node check ok, through the built CLI too (exit 0 for these checks)', async () => {
    const { node, ip } = await attachedNode();
    const fs = await findings();
    expect(bad(fs), JSON.stringify(bad(fs))).toEqual([]);
    expect(of(fs, 'ledger')[0]!.summary).toMatch(/1 ledger record\(s\) match 1 reservation\(s\)/);
    expect(of(fs, 'state-dir')[0]!.summary).toContain('private (0700, ours), 1 record(s)');
    expect(await readdir(store)).toContain(ip);
    // Which verbs host-local really implements: its CHECK fails for an attachment it never allocated (issue 47).
    expect(of(fs, 'delegate')[1]!.summary).toContain('CHECK can fail (it refused an attachment it never allocated)');

    const r = await execa('ip', ['netns', 'exec', node, SHIM, 'doctor', '--conf-dir', confDir, '--cni-path', nodeCniPath(), '--json'], {
      reject: false,
    });
    const out = JSON.parse(r.stdout);
    const mine = out.findings.filter((f: Finding) => NAMES.has(f.check));
    expect(new Set(mine.map((f: Finding) => f.check))).toEqual(NAMES);
    expect(mine.every((f: Finding) => f.verdict === 'ok')).toBe(true);
    // Whatever the other checks say, the exit code follows the verdicts.
    expect(r.exitCode).toBe(out.findings.some((f: Finding) => f.verdict === 'problem' || f.verdict === 'warn') ? 1 : 0);
  });

  it("ledger vs host-local: a lost reservation, a stranger's reservation, a conflicting one; never modifies either", async () => {
    const { node, ip } = await attachedNode();
    await rm(join(store, ip));
    await writeFile(join(store, '10.86.0.77'), 'stranger\r\neth0');
    let fs = of(await findings(), 'ledger');
    expect(fs.map((f) => f.verdict).sort()).toEqual(['problem', 'warn']);
    expect(fs.find((f) => f.verdict === 'problem')!.summary).toContain(`${ip} (c1/eth0)`);
    expect(fs.find((f) => f.verdict === 'warn')!.summary).toContain('10.86.0.77 (stranger/eth0)');
    // The same IP held by someone else in the store.
    await writeFile(join(store, ip), 'other\r\neth0');
    fs = of(await findings(), 'ledger');
    expect(fs.map((f) => f.verdict)).toEqual(['problem', 'warn']);
    expect(fs[0]!.summary).toContain(`${ip} ledger c1/eth0, store other/eth0`);
    // Report, never modify.
    expect((await readdir(store)).sort()).toEqual([ip, '10.86.0.77', 'last_reserved_ip.0', 'lock'].sort());
    expect(await readFile(join(store, ip), 'utf8')).toBe('other\r\neth0');
    // The built CLI exits 1 on these findings.
    const r = await execa('ip', ['netns', 'exec', node, SHIM, 'doctor', '--conf-dir', confDir, '--cni-path', nodeCniPath()], {
      reject: false,
    });
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/PROBLEM\s+ledger/);
    expect(r.stdout).toContain('fix: ');
  });

  it('state dir: group-writable is a problem, world-readable a warning, a corrupt record a problem', async () => {
    await attachedNode();
    await chmod(s.stateDir, 0o777);
    expect(of(await findings(), 'state-dir')).toMatchObject([
      { verdict: 'problem', summary: expect.stringContaining('writable by group or others (mode 777)') },
    ]);
    await chmod(s.stateDir, 0o755);
    expect(of(await findings(), 'state-dir')).toMatchObject([{ verdict: 'warn' }]);
    await chmod(s.stateDir, 0o700);
    await writeFile(join(s.stateDir, String(list.name), 'records', 'c2:eth0.json'), '{"v":1,');
    expect(of(await findings(), 'state-dir')).toMatchObject([{ verdict: 'problem', summary: expect.stringContaining('c2:eth0.json') }]);
  });

  it("conflist: delegate drifted from cilium-cni's IPAM, wrong delegate type, shim first, another list sorting first, a broken file", async () => {
    await attachedNode();
    const write = (l: JsonObject) => writeFile(conflist, JSON.stringify(l, null, 2));
    const plugins = list.plugins as JsonObject[];
    const shim = plugins[1]!;
    await write({ ...list, plugins: [plugins[0], { ...shim, delegate: { ...(shim.delegate as JsonObject), routes: [] } }] });
    expect(bad(of(await findings(), 'conflist'))).toMatchObject([{ verdict: 'warn', summary: expect.stringContaining('differ in routes') }]);
    await write({ ...list, plugins: [plugins[0], { ...shim, delegate: { type: 'static' } }] });
    expect(bad(of(await findings(), 'conflist'))).toMatchObject([
      { verdict: 'problem', summary: 'delegate is static but cilium-cni allocates with host-local' },
    ]);
    await write({ ...list, plugins: [shim, plugins[0]] });
    expect(bad(of(await findings(), 'conflist'))[0]).toMatchObject({ verdict: 'problem', summary: expect.stringContaining('first plugin') });
    await write(list);
    await writeFile(join(confDir, '05-other.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'other', plugins: [{ type: 'bridge' }] }));
    await writeFile(join(confDir, '50-broken.conflist'), '{"cniVersion": "1.0.0", "plugins": [');
    const all = await findings();
    // A broken file sorting after the config in use is never read by the runtime: named, not a problem (issue 37).
    expect(bad(of(all, 'conflist'))).toEqual([]);
    expect(of(all, 'conflist')[0]).toMatchObject({ verdict: 'ok', summary: expect.stringContaining('50-broken.conflist (not valid JSON') });
    // The runtime uses the first config, which does not hold the shim: the fact /readyz reports (issue 26).
    expect(of(all, 'installed')).toMatchObject([
      { verdict: 'problem', summary: expect.stringContaining('05-other.conflist, the network config the runtime uses, holds no ipam-shim entry') },
    ]);
    await unlink(join(confDir, '05-other.conflist'));
    expect(of(await findings(), 'installed')).toMatchObject([{ verdict: 'ok', summary: expect.stringContaining('which holds the shim') }]);
    // A broken file sorting first is the config the runtime uses: a problem (the file, and what it costs).
    await writeFile(join(confDir, '01-broken.conflist'), '{"cniVersion": "1.0.0", "plugins": [');
    const first = await findings();
    expect(bad(first)).toMatchObject([
      { check: 'conflist', verdict: 'problem', summary: expect.stringContaining('01-broken.conflist is not a valid network config') },
      {
        check: 'installed',
        verdict: 'problem',
        summary: expect.stringContaining('01-broken.conflist, the network config the runtime uses, cannot be used'),
      },
    ]);
  });

  it('binaries: shim missing or not answering, delegate missing; a delegate whose store cannot be read is skipped', async () => {
    await attachedNode();
    await rm(join(bin, 'ipam-shim'));
    expect(of(await findings(), 'shim-binary')).toMatchObject([{ verdict: 'problem', summary: expect.stringContaining('not on the CNI path') }]);
    await writeFile(join(bin, 'ipam-shim'), '#!/bin/sh\necho half-written >&2; exit 1\n', { mode: 0o755 });
    expect(of(await findings(), 'shim-binary')).toMatchObject([{ verdict: 'problem', summary: expect.stringContaining('does not answer VERSION') }]);
    await rm(join(bin, 'ipam-shim'));
    await execa('ln', ['-s', SHIM, join(bin, 'ipam-shim')]);
    expect(of(await findings(`${CILIUM_DIR}:${bin}`), 'delegate')).toMatchObject([
      { verdict: 'problem', summary: expect.stringContaining('host-local is not on the CNI path') },
    ]);
    // fake-ipam as the delegate (IPAM slot): answering, but its store is not host-local's.
    const slot = { cniVersion: '1.0.0', name: 'fakenet', plugins: [ciliumCni(shimKeys({ dirs: s, delegate: { type: 'fake-ipam' } }))] };
    await writeFile(conflist, JSON.stringify(slot));
    const fs = await findings(`${CILIUM_DIR}:${bin}:${FIXTURE_BIN}`);
    expect(of(fs, 'delegate')[0]!.verdict).toBe('ok');
    // fake-ipam answers every CHECK with success: doctor says CHECK proves nothing there (issue 47).
    expect(of(fs, 'delegate')[1]!.summary).toContain('CHECK proves nothing (answered success for an attachment it never allocated)');
    expect(of(fs, 'ledger')).toMatchObject([
      { verdict: 'skipped', summary: expect.stringContaining("cannot compare the ledger with fake-ipam's store") },
    ]);
    expect(of(fs, 'conflist')).toMatchObject([{ verdict: 'ok', summary: expect.stringContaining('IPAM slot of cilium-cni') }]);
  });

  it('a ledger directory with wrong permissions is one finding with its cause, not one PROBLEM per check; 0600 and 0700 are private and fine', async () => {
    const { node } = await attachedNode();
    const ledgerDir = join(s.stateDir, String(list.name));
    const doctor = async () => {
      const r = await execa('ip', ['netns', 'exec', node, SHIM, 'doctor', '--conf-dir', confDir, '--cni-path', nodeCniPath(), '--json'], {
        reject: false,
      });
      return { exitCode: r.exitCode, findings: JSON.parse(r.stdout).findings as Finding[] };
    };
    await chmod(ledgerDir, 0o777);
    const broken = await doctor();
    expect(broken.exitCode).toBe(1);
    const problems = broken.findings.filter((f) => f.verdict === 'problem');
    expect(problems, JSON.stringify(problems)).toMatchObject([
      { check: 'state-dir', summary: expect.stringContaining(`${ledgerDir} is writable by group or others (mode 777)`) },
    ]);
    expect(JSON.stringify(broken.findings)).not.toContain('see the log file');
    for (const mode of [0o600, 0o700]) {
      await chmod(ledgerDir, mode);
      const fine = await doctor();
      const mine = fine.findings.filter((f) => f.check === 'state-dir' || f.check === 'ledger');
      expect(
        mine.every((f) => f.verdict === 'ok'),
        `${mode.toString(8)}: ${JSON.stringify(mine)}`,
      ).toBe(true);
      expect(fine.findings.find((f) => f.check === 'state-dir')!.summary).toMatch(/private/);
      expect(
        fine.findings.filter((f) => f.verdict === 'problem'),
        mode.toString(8),
      ).toEqual([]);
    }
  });

  it('a corrupt ledger record: no advice to remove the host-local reservation it may own (advice only on facts that were read)', async () => {
    const { ip } = await attachedNode();
    const records = join(s.stateDir, String(list.name), 'records');
    await writeFile(join(records, 'c1:eth0.json'), '{"v":1,');
    const fs = of(await findings(), 'ledger');
    expect(JSON.stringify(fs)).not.toMatch(/remove its file|by hand/);
    expect(fs.some((f) => f.summary.includes(ip) && f.summary.includes('unreadable'))).toBe(true);
    expect(await readdir(store)).toContain(ip);
  });

  it('a conflist that does not parse (a // comment, a BOM) is named with its parse error, not "no conflist with ipam-shim found"', async () => {
    await attachedNode();
    const text = await readFile(conflist, 'utf8');
    for (const broken of [`// the shim, chained\n${text}`, `\uFEFF${text}`]) {
      await writeFile(conflist, broken);
      const r = await execa(SHIM, ['doctor', '--conf-dir', confDir, '--cni-path', nodeCniPath()], { reject: false });
      // doctor goes on without the shim's network (issue 27): the conflist finding names the file and why.
      expect(r.exitCode).toBe(1);
      expect(r.stdout).toMatch(/^PROBLEM +conflist +no conflist with ipam-shim found/m);
      expect(r.stdout).toContain(`${conflist}: cannot read conflist: `);
      expect(r.stdout).toMatch(/Unexpected token|not valid JSON/);
    }
  });

  /** The built CLI's doctor inside `ns`, as JSON: its exit status and every finding (all checks, not only the node's). */
  async function doctorIn(ns: string, args: string[], cniPath = nodeCniPath()): Promise<{ exitCode: number; text: string; findings: Finding[] }> {
    const base = ['netns', 'exec', ns, SHIM, 'doctor', '--cni-path', cniPath, ...args];
    const [j, t] = await Promise.all([execa('ip', [...base, '--json'], { reject: false }), execa('ip', base, { reject: false })]);
    expect(t.exitCode).toBe(j.exitCode);
    return { exitCode: j.exitCode!, text: t.stdout, findings: JSON.parse(j.stdout).findings };
  }

  /** A node namespace with an uplink and a default route (what reserved-routes and the probe check look at). */
  async function nodeWithUplink(): Promise<string> {
    const node = await net.netns('node');
    const peer = await net.netns('gw');
    await net.veth(node, 'eth0', peer, 'eth0');
    await execa('ip', ['-n', node, 'addr', 'add', '10.1.0.4/24', 'dev', 'eth0']);
    await execa('ip', ['-n', node, 'route', 'add', 'default', 'via', '10.1.0.1']);
    return node;
  }

  it('a healthy fresh node (the shim chained, no pod yet, no result cache): every check quiet, exit 0; a recorded pod with no cache still warns', async () => {
    list = await chainedExample();
    const [main, shim] = list.plugins as JsonObject[];
    Object.assign(shim!, { stateDir: s.stateDir, logFile: s.logFile });
    (shim!.delegate as JsonObject).dataDir = s.dataDir;
    (main!.ipam as JsonObject).dataDir = s.dataDir;
    confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    await writeFile(join(confDir, '10-generic.conflist'), JSON.stringify(list));
    bin = await shimBinDir(s.dir);
    const node = await nodeWithUplink();
    const cache = join(s.dir, 'no-cache-yet');
    const fresh = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(bad(fresh.findings), fresh.text).toEqual([]);
    expect(fresh.exitCode, fresh.text).toBe(0);
    expect(of(fresh.findings, 'runtime-pods')).toMatchObject([
      { verdict: 'ok', summary: expect.stringContaining(`no pods yet: the runtime's result cache ${cache}/results does not exist`) },
    ]);
    expect(fresh.text).toMatch(/all checks passed$/);

    // Once the ledger holds a pod, a missing cache is "could not look" again (a wrong --cache-dir), never "no pods".
    const runner = new CniRunner({
      confList: list,
      pluginDirs: [CILIUM_DIR, bin, PLUGIN_DIR],
      cacheDir: join(s.dir, 'cache'),
      netns: node,
      env: ciliumAgent.agent.env(),
    });
    await runner.add('c1', `/run/netns/${await net.netns('pod')}`);
    const blind = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(of(blind.findings, 'runtime-pods')).toMatchObject([
      { verdict: 'warn', summary: expect.stringContaining('does not exist, while the ledger holds 1 pod attachment(s)') },
    ]);
    expect(blind.exitCode).toBe(1);
  });

  it("no cilium-cni conflist: one PROBLEM that says so plainly, nothing about the other networks' plugins", async () => {
    bin = await shimBinDir(s.dir);
    confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    const node = await nodeWithUplink();
    const cache = join(s.dir, 'cache');
    // containerd's default network with a plugin that is nowhere, and a broken file: neither is the shim's business.
    const containerdNet = {
      cniVersion: '1.0.0',
      name: 'containerd-net',
      plugins: [{ type: 'bridge', ipam: { type: 'host-local', subnet: '10.88.0.0/16' } }, { type: 'no-such-plugin' }],
    };
    await writeFile(join(confDir, '10-containerd-net.conflist'), JSON.stringify(containerdNet));
    await writeFile(join(confDir, '99-broken.conflist'), '{"cniVersion": ');
    const r = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(r.exitCode).toBe(1);
    expect(bad(r.findings), r.text).toMatchObject([
      { check: 'conflist', verdict: 'problem', summary: expect.stringContaining('and no cilium-cni conflist that parses') },
    ]);
    expect(r.text).toContain('99-broken.conflist: cannot read conflist: not valid JSON'); // may be cilium's: named first
    expect(r.text).toContain('10-containerd-net.conflist (bridge → no-such-plugin)'); // what is there instead
    expect(r.text).not.toMatch(/no-such-plugin, listed in/);
    expect(of(r.findings, 'main-plugin')).toMatchObject([{ verdict: 'skipped' }]);
    expect(of(r.findings, 'ipv6-probe')).toMatchObject([{ verdict: 'skipped' }]);

    // Without the broken file, and with no config at all: plainly "no cilium-cni conflist", first.
    await unlink(join(confDir, '99-broken.conflist'));
    const other = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(bad(other.findings), other.text).toMatchObject([{ check: 'conflist', verdict: 'problem' }]);
    expect(other.text).toMatch(
      /^PROBLEM +conflist +no cilium-cni conflist in .*\(configs there: .*10-containerd-net.conflist \(bridge → no-such-plugin\)\)/m,
    );
    await unlink(join(confDir, '10-containerd-net.conflist'));
    const empty = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(bad(empty.findings)).toMatchObject([
      { check: 'conflist', summary: expect.stringContaining(`no cilium-cni conflist in ${confDir} (no network config there)`) },
    ]);

    // Cilium's conflist without the shim (delegated IPAM, AKS's shape): that is the cause named, and cilium's own
    // plugins are checked. (Without an IPAM plugin it is cluster-pool's: nothing to chain to, test/e2e/cli.test.ts.)
    const cilium = { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' }, 'enable-debug': false }] };
    await writeFile(join(confDir, '05-cilium.conflist'), JSON.stringify(cilium));
    const bare = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache]);
    expect(of(bare.findings, 'conflist')).toMatchObject([
      { verdict: 'problem', summary: expect.stringContaining("05-cilium.conflist holds cilium-cni without the shim's entry") },
    ]);
    // cilium-cni (the 1.17 stand-in on this node's path) is found and asked its VERSION: it takes the list's 0.3.1.
    expect(of(bare.findings, 'main-plugin')).toMatchObject([
      { verdict: 'ok', summary: expect.stringContaining(`is on the CNI path: ${CILIUM_DIR}/cilium-cni`) },
      { verdict: 'ok', summary: expect.stringContaining('cilium-cni takes 0.3.1') },
    ]);
    // Not on the path: every ADD of that network would fail, a problem.
    const missing = await doctorIn(node, ['--conf-dir', confDir, '--cache-dir', cache], `${bin}:${PLUGIN_DIR}`);
    expect(of(missing.findings, 'main-plugin')).toMatchObject([{ verdict: 'problem', summary: expect.stringContaining('cilium-cni, listed in') }]);
  });

  it('residue scan --conf-dir /nonexistent exits 3 (could not run) and says the directory does not exist', async () => {
    const missing = join(s.dir, 'no-such-net.d');
    const r = await execa(SHIM, ['residue', 'scan', '--conf-dir', missing], { reject: false });
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toContain(`conf dir ${missing} does not exist`);
  });
});
