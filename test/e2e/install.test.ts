// `ipam-shim install` / `uninstall` on a simulated node (temp dirs shaped like /opt/cni/bin and
// /etc/cni/net.d holding AKS's 0.3.1 cilium conflist), run through the BUILT CLI; `--watch` against a
// cilium-agent-style rewrite; and the metrics file written by real plugin invocations.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa, type ResultPromise } from 'execa';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, readdir, readFile, readlink, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseMetrics } from '../../src/metrics.js';
import { TestNet, inNs, rootOrSkip } from '../support/net/netns.js';
import { BUNDLE_SHIM, PLUGIN_DIR, ROOT, SHIM, invoke, ledgerRecords, scratch } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { waitFor as waitForEvery } from '../support/wait.js';
import { jsonLines } from '../support/shim/agent.js';
import { type CiliumLine, ciliumCniDir } from '../support/shim/cilium.js';

const SEA = join(ROOT, 'dist/ipam-shim');
// AKS's /etc/cni/net.d/05-cilium.conflist as a node shows it: tabs, cniVersion 0.3.1, cilium-cni + azure-ipam.
const AKS_CILIUM =
  '{\n\t"cniVersion": "0.3.1",\n\t"name": "cilium",\n\t"plugins": [\n\t\t{\n\t\t\t"type": "cilium-cni",\n\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"enable-debug": true,\n\t\t\t"log-file": "/var/log/cilium-cni.log"\n\t\t}\n\t]\n}\n';
const OTHER_FILES: Record<string, string> = {
  '10-azure.conflist.cilium_bak':
    '{"cniVersion":"0.3.0","name":"azure","plugins":[{"type":"azure-vnet","mode":"transparent","ipam":{"type":"azure-vnet-ipam"}}]}\n',
  '99-loopback.conf': '{\n  "cniVersion": "0.3.1",\n  "name": "lo",\n  "type": "loopback"\n}\n',
};
const SHIM_CONFIG = '{"reservedCIDRs":["10.224.0.0/24"]}';

let s: Awaited<ReturnType<typeof scratch>>;
let binDir: string;
let confDir: string;
let conflist: string;
const children: ResultPromise[] = [];

beforeEach(async () => {
  s = await scratch();
  binDir = join(s.dir, 'node/opt/cni/bin');
  confDir = join(s.dir, 'node/etc/cni/net.d');
  conflist = join(confDir, '05-cilium.conflist');
  await mkdir(binDir, { recursive: true });
  await mkdir(confDir, { recursive: true });
  await writeFile(join(binDir, 'loopback'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  await writeFile(conflist, AKS_CILIUM, { mode: 0o644 });
  for (const [n, t] of Object.entries(OTHER_FILES)) await writeFile(join(confDir, n), t);
});
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.pid && c.exitCode === null) c.kill('SIGKILL');
    await c.catch(() => undefined);
  }
  await s.cleanup();
});

const cli = (args: string[], file = SHIM) => execa(file, args, { reject: false, timeout: 60_000 });
const layout = ['--cni-bin-dir', () => binDir, '--conf-dir', () => confDir] as const;
const flags = () => layout.map((x) => (typeof x === 'function' ? x() : x));
const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');
async function othersUnchanged(): Promise<void> {
  for (const [n, t] of Object.entries(OTHER_FILES)) expect(await readFile(join(confDir, n), 'utf8')).toBe(t);
  expect(await readFile(join(binDir, 'loopback'), 'utf8')).toBe('#!/bin/sh\nexit 0\n');
  expect((await readdir(binDir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  expect((await readdir(confDir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
}

const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 15_000) => waitForEvery(what, pred, ms);

describe('install / uninstall on a simulated node', () => {
  it('installs the running executable and chains the shim after cilium-cni, touching nothing else', async () => {
    const r = await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('shim entry inserted');
    // The default source under node is the bundled script itself.
    const installed = join(binDir, 'ipam-shim');
    expect(await sha(installed)).toBe(await sha(SHIM));
    expect((await stat(installed)).mode & 0o777).toBe(0o755);
    // Byte for byte what the shipped example shows: cilium-cni's entry and every other byte are as AKS wrote them.
    expect(await readFile(conflist, 'utf8')).toBe(await readFile(join(ROOT, 'conflist/aks-cilium-0.3.1.conflist'), 'utf8'));
    expect((await stat(conflist)).mode & 0o777).toBe(0o644);
    await othersUnchanged();
    // The installed copy is a working plugin.
    const v = await execa(installed, [], { env: { CNI_COMMAND: 'VERSION' }, input: '{"cniVersion":"0.3.1"}' });
    expect(JSON.parse(v.stdout).supportedVersions).toContain('0.3.1');
  });

  it('is idempotent: a second install writes nothing', async () => {
    expect((await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG])).exitCode).toBe(0);
    const before = { conf: await stat(conflist), bin: await stat(join(binDir, 'ipam-shim')) };
    const r = await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ binary: { action: 'unchanged' }, conflist: { action: 'unchanged' } });
    const after = { conf: await stat(conflist), bin: await stat(join(binDir, 'ipam-shim')) };
    expect([after.conf.ino, after.conf.mtimeMs, after.bin.ino, after.bin.mtimeMs]).toEqual([
      before.conf.ino,
      before.conf.mtimeMs,
      before.bin.ino,
      before.bin.mtimeMs,
    ]);
  });

  it('updates the entry for a new --shim-config and uninstall restores the original bytes', async () => {
    expect((await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG])).exitCode).toBe(0);
    const r = await cli(['install', ...flags(), '--shim-config', '{"reservedCIDRs":[],"logLevel":"debug"}', '--json']);
    expect(JSON.parse(r.stdout).conflist.action).toBe('updated');
    const list = JSON.parse(await readFile(conflist, 'utf8'));
    expect(list.plugins[1]).toEqual({ type: 'ipam-shim', delegate: { type: 'azure-ipam' }, reservedCIDRs: [], logLevel: 'debug' });
    const u = await cli(['uninstall', ...flags()]);
    expect(u.exitCode, u.stderr).toBe(0);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(false);
    await othersUnchanged();
    // Uninstalling again is a no-op.
    const again = await cli(['uninstall', ...flags(), '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ conflists: [], binary: { action: 'absent' } });
  });

  it('uninstall --conf-dir with a typo: exit 3, says the directory does not exist, removes nothing (the binary stays for the real conflist)', async () => {
    expect((await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG])).exitCode).toBe(0);
    const installed = await readFile(conflist, 'utf8');
    const typo = join(s.dir, 'node/etc/cni/net.dd');
    const r = await cli(['uninstall', '--cni-bin-dir', binDir, '--conf-dir', typo]);
    expect(r.exitCode, r.stdout).toBe(3);
    expect(r.stderr).toContain(`conf dir ${typo} does not exist: nothing uninstalled`);
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
    expect(await readFile(conflist, 'utf8')).toBe(installed);
    const json = await cli(['uninstall', '--cni-bin-dir', binDir, '--conf-dir', typo, '--json']);
    expect(json.exitCode).toBe(3);
    expect(JSON.parse(json.stdout).error).toContain('does not exist');
    await othersUnchanged();
  });

  it('refuses a bad --shim-config (exit 2) and writes nothing', async () => {
    const r = await cli(['install', ...flags(), '--shim-config', '{"reservedCIDR":["10.0.0.0/8"]}']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('unsupported field "reservedCIDR"');
    const bad = await cli(['install', ...flags(), '--shim-config', '{"delegateTimeoutMs":1}']);
    expect(bad.exitCode).toBe(2);
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(false);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
  });

  it('exits 1 when no conflist holds cilium-cni (yet), after installing the binary', async () => {
    await rename(conflist, join(s.dir, 'away'));
    const r = await cli(['install', ...flags()]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain('no conflist with cilium-cni');
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
  });

  it('--binary-only: exit 0 on a fresh node with no conflist yet; only the executable is written', async () => {
    await rename(conflist, join(s.dir, 'away'));
    const before = await readdir(confDir);
    const r = await cli(['install', '--binary-only', '--cni-bin-dir', binDir, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ binary: { path: join(binDir, 'ipam-shim'), action: 'installed' } });
    expect(await sha(join(binDir, 'ipam-shim'))).toBe(await sha(SHIM));
    expect(await readdir(confDir)).toEqual(before);
    await othersUnchanged();
    // A conflist present is not touched either (Cilium's route: cilium-agent writes it from the cni.configMap).
    await rename(join(s.dir, 'away'), conflist);
    const again = await cli(['install', '--binary-only', '--cni-bin-dir', binDir]);
    expect([again.exitCode, again.stdout]).toEqual([0, `binary: ${join(binDir, 'ipam-shim')} unchanged`]);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
    // Flags that would read or edit a conflist are refused (exit 2).
    for (const extra of [['--conf-dir', confDir], ['--shim-config', SHIM_CONFIG], ['--watch'], ['--print']])
      expect((await cli(['install', '--binary-only', '--cni-bin-dir', binDir, ...extra])).exitCode, extra.join(' ')).toBe(2);
  });

  it('replaces a running binary by rename: where an in-place write fails (ETXTBSY), install succeeds', async () => {
    // The single executable, installed and running (its own install --watch on a second layout keeps it alive).
    const r = await cli(['install', ...flags(), '--source', SEA]);
    expect(r.exitCode, r.stderr).toBe(0);
    const installed = join(binDir, 'ipam-shim');
    expect(await sha(installed)).toBe(await sha(SEA));
    const other = join(s.dir, 'other');
    await mkdir(join(other, 'net.d'), { recursive: true });
    const running = execa(installed, ['install', '--watch', '--cni-bin-dir', join(other, 'bin'), '--conf-dir', join(other, 'net.d')], {
      reject: false,
    });
    children.push(running);
    await waitFor('the running copy to install itself', async () => existsSync(join(other, 'bin/ipam-shim')));
    await expect(writeFile(installed, 'x')).rejects.toMatchObject({ code: 'ETXTBSY' });
    const oldIno = (await stat(installed)).ino;
    // Another file than the installed executable: the bundle of the same build.
    const again = await cli(['install', ...flags(), '--source', BUNDLE_SHIM, '--json']);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).binary.action).toBe('updated');
    expect(await sha(installed)).toBe(await sha(BUNDLE_SHIM));
    expect((await stat(installed)).ino).not.toBe(oldIno);
    expect(running.exitCode).toBeNull(); // the running copy kept its inode and runs on
    running.kill('SIGTERM');
    expect((await running).exitCode).toBe(0);
    await othersUnchanged();
  });
});

describe("install --print: the list for Cilium's own route (cni.customConf + cni.configMap)", () => {
  it("writes the conflist with the shim's entry to stdout (what install would write), changing no file and installing nothing", async () => {
    const before = await readFile(conflist);
    const st = await stat(conflist);
    const r = await cli(['install', '--print', '--conf-dir', confDir, '--shim-config', SHIM_CONFIG]);
    expect(r.exitCode, r.stderr).toBe(0);
    // Exactly what install writes: the shipped example (every byte of AKS's list kept, the entry after cilium-cni).
    expect(`${r.stdout}\n`).toBe(await readFile(join(ROOT, 'conflist/aks-cilium-0.3.1.conflist'), 'utf8'));
    expect((await readFile(conflist)).equals(before)).toBe(true);
    expect([(await stat(conflist)).ino, (await stat(conflist)).mtimeMs]).toEqual([st.ino, st.mtimeMs]);
    expect(await readdir(binDir)).toEqual(['loopback']);
    await othersUnchanged();
    // --json: the list and where it came from.
    const j = await cli(['install', '--print', '--conf-dir', confDir, '--shim-config', SHIM_CONFIG, '--json']);
    expect(JSON.parse(j.stdout)).toMatchObject({ path: conflist, action: 'inserted', conflist: `${r.stdout}\n` });
    expect((await readFile(conflist)).equals(before)).toBe(true);
  });

  it('exits 1 with the reason when no conflist holds cilium-cni; refuses flags that would change something (exit 2)', async () => {
    const empty = join(s.dir, 'empty');
    await mkdir(empty);
    const r = await cli(['install', '--print', '--conf-dir', empty]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('no conflist with cilium-cni');
    for (const extra of [['--watch'], ['--binary-only']])
      expect((await cli(['install', '--print', '--conf-dir', confDir, ...extra])).exitCode, extra.join(' ')).toBe(2);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
  });
});

// cilium-cni 1.17 and older support spec <= 1.0.0 and refuse a 1.1.0 config on every ADD (issue 41): install asks
// the cilium-cni in --cni-bin-dir (the stand-in of a Cilium line, linked where cilium-agent copies the real one).
describe('install asks cilium-cni its VERSION and never chains into a list it refuses', () => {
  /** AKS's list at another version: its bytes as cilium-agent would write them. */
  const ciliumAt = (cniVersion: string, cniVersions?: string[]) =>
    `${JSON.stringify({ cniVersion, ...(cniVersions ? { cniVersions } : {}), name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }] }, null, 2)}\n`;
  const withCilium = (line: CiliumLine) => symlink(join(ciliumCniDir(line), 'cilium-cni'), join(binDir, 'cilium-cni'));

  it("the README's old 1.1.0 list in front of cilium-cni 1.17: exit 1, both versions and 1.0.0 named, the list byte for byte untouched", async () => {
    await withCilium('1.17');
    const old = ciliumAt('1.1.0', ['0.3.1', '1.0.0', '1.1.0']);
    await writeFile(conflist, old);
    const before = await stat(conflist);
    const r = await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG]);
    expect(r.exitCode, r.stdout).toBe(1);
    expect(r.stdout).toContain(`conflist: ${conflist} left as it is: its plugins do not take its version`);
    expect(r.stdout).toContain(
      `refused: cilium-cni (${join(binDir, 'cilium-cni')}) supports up to 1.0.0 (0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0); the list is at 1.1.0: every ADD fails with "incompatible CNI versions" before the shim runs; use cniVersion "1.0.0" with nothing above 1.0.0 in cniVersions`,
    );
    expect(await readFile(conflist, 'utf8')).toBe(old);
    expect([(await stat(conflist)).ino, (await stat(conflist)).mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    await othersUnchanged();
    // --json: the verdict for machines; --print: nothing printed, exit 1.
    const j = await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG, '--json']);
    expect(j.exitCode).toBe(1);
    expect(JSON.parse(j.stdout).conflist).toMatchObject({
      action: 'refused',
      versions: { state: 'refused', written: '1.1.0', picked: '1.1.0', use: '1.0.0' },
    });
    const p = await cli(['install', '--print', '--conf-dir', confDir, '--cni-bin-dir', binDir]);
    expect([p.exitCode, p.stdout]).toEqual([1, '']);
    expect(p.stderr).toContain('supports up to 1.0.0');
    expect(await readFile(conflist, 'utf8')).toBe(old);
  });

  it('cniVersion 1.0.0 with 1.1.0 in cniVersions is refused too (libcni >= 1.2 picks 1.1.0); the same list without it is chained', async () => {
    await withCilium('1.17');
    const picked = ciliumAt('1.0.0', ['1.0.0', '1.1.0']);
    await writeFile(conflist, picked);
    const r = await cli(['install', ...flags()]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain('the list says cniVersion 1.0.0 and libcni ≥ 1.2 picks 1.1.0 from its cniVersions');
    expect(await readFile(conflist, 'utf8')).toBe(picked);
    await writeFile(conflist, ciliumAt('1.0.0'));
    const ok = await cli(['install', ...flags()]);
    expect(ok.exitCode, ok.stdout).toBe(0);
    expect(ok.stdout).toContain('shim entry inserted');
    expect(ok.stdout).not.toMatch(/refused|warning/);
  });

  it('a 1.1.0 list in front of a newer cilium-cni (it lists 1.1.0) is chained', async () => {
    await withCilium('newer');
    await writeFile(conflist, ciliumAt('1.1.0', ['0.3.1', '1.0.0', '1.1.0']));
    const r = await cli(['install', ...flags(), '--json']);
    expect(r.exitCode, r.stdout).toBe(0);
    expect(JSON.parse(r.stdout).conflist).toMatchObject({ action: 'inserted', versions: { state: 'taken', use: '1.1.0' } });
  });

  it('cilium-cni not installed yet: install goes on and says it could not ask (exit 0, "not-asked", never "taken")', async () => {
    const r = await cli(['install', ...flags(), '--json']);
    expect(r.exitCode).toBe(0);
    expect(JSON.parse(r.stdout).conflist).toMatchObject({ action: 'inserted', versions: { state: 'not-asked' } });
    const t = await cli(['install', ...flags()]);
    expect(t.stdout).toContain(`warning: could not ask cilium-cni (not in ${binDir}) its VERSION: whether it takes 0.3.1 is not known`);
  });

  it('--watch: keeps the entry out of a refused list on every check, and puts it in once cilium-agent writes the list at 1.0.0', async () => {
    await withCilium('1.17');
    const old = ciliumAt('1.1.0', ['0.3.1', '1.0.0', '1.1.0']);
    await writeFile(conflist, old);
    const watch = execa(SHIM, ['install', ...flags(), '--watch', '--interval', '0.2', '--json'], { reject: false });
    children.push(watch);
    let stderr = '';
    watch.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    await waitFor('the refusal logged', () => stderr.includes('entry not put in: cilium-cni'));
    await new Promise((res) => setTimeout(res, 1000)); // ~5 more checks
    expect(await readFile(conflist, 'utf8')).toBe(old);
    await writeFile(join(confDir, '.05-cilium.conflist.tmp1'), ciliumAt('1.0.0'));
    await rename(join(confDir, '.05-cilium.conflist.tmp1'), conflist);
    await waitFor('the entry after the list went to 1.0.0', async () => (await readFile(conflist, 'utf8')).includes('"ipam-shim"'));
    watch.kill('SIGTERM');
    expect((await watch).exitCode).toBe(0);
  });
});

describe('install checks what it is given and keeps what is there', () => {
  it('refuses a --shim-config the plugin would refuse on every ADD (a reservedCIDRs entry that is not a CIDR), exit 2, nothing written', async () => {
    const r = await cli(['install', ...flags(), '--shim-config', '{"reservedCIDRs":["10.224.0.0/24","not-a-cidr"]}']);
    expect(r.exitCode, r.stdout).toBe(2);
    expect(r.stderr).toContain('invalid reservedCIDRs');
    expect(r.stderr).toContain('"not-a-cidr"');
    const probe = await cli(['install', ...flags(), '--shim-config', '{"ipv6ProbeRewrite":"on","probeSource":"fe80::1%eth0"}']);
    expect(probe.exitCode, probe.stdout).toBe(2);
    expect(probe.stderr).toContain('probeSource: not a plain IPv6 address');
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(false);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
  });

  it('a second run without --shim-config keeps the entry\'s settings: nothing changes, nothing is "updated"', async () => {
    const keys = { reservedCIDRs: ['10.224.0.0/24'], stateDir: '/var/lib/cni/ipam-shim-custom', logLevel: 'debug' };
    expect((await cli(['install', ...flags(), '--shim-config', JSON.stringify(keys)])).exitCode).toBe(0);
    const text = await readFile(conflist, 'utf8');
    const before = await stat(conflist);
    const r = await cli(['install', ...flags(), '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ conflist: { action: 'unchanged' } });
    expect(await readFile(conflist, 'utf8')).toBe(text);
    expect((await stat(conflist)).mtimeMs).toBe(before.mtimeMs);
    expect(JSON.parse(text).plugins[1]).toEqual({ type: 'ipam-shim', delegate: { type: 'azure-ipam' }, ...keys });
  });

  it('names a conflist that does not parse (a // comment, a BOM) and its parse error instead of "run again once it exists"', async () => {
    await writeFile(conflist, `// written by hand\n${AKS_CILIUM}`);
    const r = await cli(['install', ...flags()]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain(`cannot parse ${conflist}: not valid JSON`);
    expect(r.stdout).not.toContain('run again once it exists');
    await writeFile(conflist, `\uFEFF${AKS_CILIUM}`);
    const bom = await cli(['install', ...flags()]);
    expect(bom.stdout).toContain(`cannot parse ${conflist}: not valid JSON`);
  });

  it('keeps a symlinked conflist a symlink and writes through to its target', async () => {
    const target = join(s.dir, 'node/etc/cilium-cni.conflist');
    await rename(conflist, target);
    await symlink(target, conflist);
    const r = await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect((await lstat(conflist)).isSymbolicLink()).toBe(true);
    expect(await readlink(conflist)).toBe(target);
    expect(await readFile(target, 'utf8')).toBe(await readFile(join(ROOT, 'conflist/aks-cilium-0.3.1.conflist'), 'utf8'));
    expect((await readdir(join(s.dir, 'node/etc'))).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('refuses a --source that is not an ipam-shim executable (/bin/true), exit 2, nothing written', async () => {
    const r = await cli(['install', ...flags(), '--source', '/bin/true']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('/bin/true is not an ipam-shim executable');
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(false);
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
  });

  it('warns when another network config sorts first (libcni uses the first) and when cilium-cni has no ipam', async () => {
    await writeFile(join(confDir, '01-other.conflist'), '{"cniVersion":"0.3.1","name":"other","plugins":[{"type":"bridge"}]}\n');
    await writeFile(conflist, AKS_CILIUM.replace('\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n', ''));
    const r = await cli(['install', ...flags()]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`warning: ${join(confDir, '01-other.conflist')} sorts before ${conflist}`);
    expect(r.stdout).toMatch(/warning: cilium-cni in .* has no "ipam"/);
  });
});

describe('docs/operations.md walkthrough', () => {
  it('"Try it on a simulated node" runs as written: install, doctor, uninstall on temp dirs', async () => {
    const md = await readFile(join(ROOT, 'docs/operations.md'), 'utf8');
    const block = [...md.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith('# Try it on a simulated node'));
    expect(block).toBeDefined();
    const r = await execa('bash', ['-euo', 'pipefail', '-c', block!], { cwd: ROOT, reject: false, timeout: 120_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('shim entry inserted');
    expect(r.stdout).toMatch(/"type": "ipam-shim",\n\t\t\t"delegate": \{\n\t\t\t\t"type": "azure-ipam"/);
    expect(r.stdout).toMatch(/^ok +conflist +chained after cilium-cni/m);
    expect(r.stdout).toMatch(/^ok +delegate +.*azure-ipam answers VERSION/m);
    expect(r.stdout).toContain('removed 1 shim entry');
  });
});

describe('install --watch', () => {
  it('without --shim-config, keeps the settings of the entry it found and puts them back after a rewrite', async () => {
    expect((await cli(['install', ...flags(), '--shim-config', SHIM_CONFIG])).exitCode).toBe(0);
    const expected = await readFile(conflist, 'utf8');
    const watch = execa(SHIM, ['install', ...flags(), '--watch', '--interval', '1', '--json'], { reject: false });
    children.push(watch);
    let progress = '';
    watch.stderr!.on('data', (d: Buffer) => (progress += d.toString()));
    // Its first check has seen the entry (and so taken its settings): logged once that check is done. A rewrite
    // before it would leave the watcher nothing to take the settings from.
    await waitFor("the watcher's first check", () => jsonLines(progress).some((l) => l.msg === 'conflist checked'));
    expect(await readFile(conflist, 'utf8')).toBe(expected);
    await writeFile(join(confDir, '.05-cilium.conflist.tmp1'), AKS_CILIUM);
    await rename(join(confDir, '.05-cilium.conflist.tmp1'), conflist);
    await waitFor('the entry with its reservedCIDRs after a rewrite', async () => (await readFile(conflist, 'utf8')) === expected);
    watch.kill('SIGTERM');
    expect((await watch).exitCode).toBe(0);
  });

  it('waits for the conflist, puts the entry back after cilium-agent rewrites the file, exits 0 on SIGTERM', async () => {
    await rename(conflist, join(s.dir, 'away'));
    const watch = execa(SHIM, ['install', ...flags(), '--shim-config', SHIM_CONFIG, '--watch', '--interval', '1', '--json'], { reject: false });
    children.push(watch);
    const expected = await readFile(join(ROOT, 'conflist/aks-cilium-0.3.1.conflist'), 'utf8');
    await waitFor('the binary', async () => existsSync(join(binDir, 'ipam-shim')));
    // cilium-agent starts and writes its conflist (temp file + rename).
    await writeFile(join(confDir, '.05-cilium.conflist.tmp1'), AKS_CILIUM);
    await rename(join(confDir, '.05-cilium.conflist.tmp1'), conflist);
    await waitFor('the entry after the first write', async () => (await readFile(conflist, 'utf8')) === expected);
    // cilium-agent restarts and rewrites the file in place.
    await writeFile(conflist, AKS_CILIUM);
    await waitFor('the entry after an in-place rewrite', async () => (await readFile(conflist, 'utf8')) === expected);
    // ... and by rename once more.
    await writeFile(join(confDir, '.05-cilium.conflist.tmp2'), AKS_CILIUM);
    await rename(join(confDir, '.05-cilium.conflist.tmp2'), conflist);
    await waitFor('the entry after a rename rewrite', async () => (await readFile(conflist, 'utf8')) === expected);
    watch.kill('SIGTERM');
    const done = await watch;
    expect(done.exitCode, done.stderr).toBe(0);
    const summary = JSON.parse(done.stdout);
    expect(summary).toMatchObject({ watch: true, errors: 0 });
    expect(summary.restores).toBeGreaterThanOrEqual(2);
    // Progress is logged on stderr as JSON lines.
    expect(done.stderr).toContain('put back');
    await othersUnchanged();
  });
});

// ---------------------------------------------------------------------------------------------------------------

const root = rootOrSkip();
(root ? describe : describe.skip)('metrics file from real invocations', () => {
  let net: TestNet;
  beforeEach(() => {
    net = new TestNet();
  });
  afterEach(async () => {
    await net.cleanup();
  });

  it('counts invocations, errors, refusals, residue removed and GC releases without losing concurrent updates', async () => {
    const node = await net.netns('node');
    const metricsFile = join(s.dir, 'textfile/ipam-shim.prom');
    const conf = (name: string, subnet: string, reserved: string[] = []) =>
      shimConf({ cniVersion: '1.1.0', name, dirs: s, delegate: hostLocal(s.dataDir, subnet), keys: { metricsFile, reservedCIDRs: reserved } });
    const mnet = conf('mnet', '10.97.0.0/24');
    const env = (command: string, containerID: string, netns = '/run/netns/whatever') => ({
      command,
      containerID,
      netns,
      ifname: 'eth0',
      path: [PLUGIN_DIR],
      inNetns: node,
    });
    // azure-vnet residue for the first address host-local hands out.
    await inNs(node, 'ebtables', [
      '-t',
      'nat',
      '-A',
      'PREROUTING',
      '-p',
      'IPv4',
      '-i',
      'eth0',
      '--ip-dst',
      '10.97.0.2',
      '-j',
      'dnat',
      '--to-dst',
      '02:00:00:00:00:01',
      '--dnat-target',
      'ACCEPT',
    ]);

    const ids = Array.from({ length: 8 }, (_, i) => `m${i}`);
    const adds = await Promise.all(ids.map((id) => invoke(mnet, env('ADD', id))));
    for (const a of adds) expect(a.exitCode, a.stdout).toBe(0);
    expect((await inNs(node, 'ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout).not.toContain('10.97.0.2');
    // A range wholly inside a reserved CIDR: refused twice (code 100), on another network in the same file.
    for (let i = 0; i < 2; i++)
      expect((await invoke(conf('mres', '10.98.0.0/29', ['10.98.0.0/29']), env('ADD', `r${i}`))).json).toMatchObject({
        code: ErrorCode.ReservedAddress,
      });
    // An attachment whose netns is gone: GC releases it.
    expect((await invoke(mnet, env('ADD', 'ghost', '/run/netns/does-not-exist'))).exitCode).toBe(0);
    const gc = await invoke(
      { ...mnet, 'cni.dev/valid-attachments': ids.map((containerID) => ({ containerID, ifname: 'eth0' })) },
      { command: 'GC', path: [PLUGIN_DIR], inNetns: node },
    );
    expect(gc.exitCode, gc.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, 'mnet')).toHaveLength(8);
    await Promise.all(ids.slice(0, 6).map((id) => invoke(mnet, env('DEL', id))));

    const text = await readFile(metricsFile, 'utf8');
    expect((await stat(metricsFile)).mode & 0o777).toBe(0o644);
    // Text format: HELP and TYPE before each family, "name{labels} value" lines.
    for (const line of text.trim().split('\n'))
      expect(line).toMatch(/^(# (HELP|TYPE) ipam_shim_\w+ .+|ipam_shim_\w+\{[^}]*\} (\d+|\d+\.\d+(e-?\d+)?|\+Inf))$/);
    const m = parseMetrics(text);
    const v = (name: string, labels: string) => m.get(`${name}{${labels}}`)?.value;
    expect(v('ipam_shim_invocations_total', 'network="mnet",verb="ADD"')).toBe(9);
    expect(v('ipam_shim_invocations_total', 'network="mnet",verb="GC"')).toBe(1);
    expect(v('ipam_shim_invocations_total', 'network="mnet",verb="DEL"')).toBe(6);
    expect(v('ipam_shim_invocations_total', 'network="mres",verb="ADD"')).toBe(2);
    expect(v('ipam_shim_errors_total', 'code="100",network="mres",verb="ADD"')).toBe(2);
    expect(v('ipam_shim_reserved_refusals_total', 'network="mres"')).toBe(2);
    expect(v('ipam_shim_residue_removed_total', 'kind="ebtables",network="mnet"')).toBe(1);
    expect(v('ipam_shim_gc_released_total', 'network="mnet"')).toBe(1);
    expect(v('ipam_shim_ledger_attachments', 'network="mnet"')).toBe(2);
    expect(v('ipam_shim_agent_ips', 'network="mnet"')).toBe(0);
    // mnet's calls all succeeded: its error series are there, each at 0 (every verb × code from the first call).
    const mnetErrors = [...m.values()].filter((x) => x.name === 'ipam_shim_errors_total' && x.labels.network === 'mnet');
    expect(mnetErrors).toHaveLength(5 * Object.values(ErrorCode).length);
    expect(mnetErrors.every((x) => x.value === 0)).toBe(true);
  });

  it('a metrics file that cannot be written never changes the CNI outcome', async () => {
    const blocker = join(s.dir, 'not-a-dir');
    await writeFile(blocker, '');
    await chmod(blocker, 0o444);
    const c = shimConf({ name: 'mfail', dirs: s, delegate: hostLocal(s.dataDir, '10.96.0.0/24'), keys: { metricsFile: join(blocker, 'x.prom') } });
    const a = await invoke(c, { command: 'ADD', containerID: 'f1', netns: '/run/netns/x', ifname: 'eth0', path: [PLUGIN_DIR] });
    expect(a.exitCode, a.stdout).toBe(0);
    expect(a.json.ips[0].address).toBe('10.96.0.2/24');
    expect(await readFile(s.logFile, 'utf8')).toContain('metrics not written');
    expect((await invoke(c, { command: 'DEL', containerID: 'f1', ifname: 'eth0', path: [PLUGIN_DIR] })).exitCode).toBe(0);
  });
});
