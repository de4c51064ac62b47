// A list whose first plugin does not take its version (the README's old 1.1.0 list in front of cilium-cni 1.17,
// which supports <= 1.0.0 and refuses it on every ADD) as doctor and the node agent see it, through the built
// executable, with the cilium-cni stand-in of each Cilium line (test/fixtures/cilium-cni/) where cilium-cni sits.
// install's refusal is in test/e2e/install.test.ts; the rule itself in test/unit/list-versions.test.ts.
import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseMetrics } from '../../src/metrics.js';
import { rootOrSkip, type TestNet } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { type CiliumLine, ciliumCniDir } from '../support/shim/cilium.js';
import { FIXTURE_BIN, ROOT, SHIM, shimBinDir } from '../support/shim/cni.js';
import { shimKeys } from '../support/shim/conf.js';
import { agentArgs, agentGet, followAgent } from '../support/shim/agent.js';
import { waitFor } from '../support/wait.js';

const root = rootOrSkip();
const d = root ? describe : describe.skip;
const AGENT = join(ROOT, 'dist/ipam-shim');
const { s, net } = useScratchNet();

/** cilium's list (cilium-cni delegating to fake-ipam, azure-ipam's place) at `cniVersion`, optionally with cniVersions. */
const ciliumList = (cniVersion: string, cniVersions?: string[]) => ({
  cniVersion,
  ...(cniVersions ? { cniVersions } : {}),
  name: 'cilium',
  plugins: [{ type: 'cilium-cni', ipam: { type: 'fake-ipam' } }],
});
/** The same list with the shim's entry after cilium-cni (as an earlier install would have left it). */
const withShim = (list: Record<string, any>) => ({
  ...list,
  plugins: [...list.plugins, shimKeys({ dirs: s, probeRewrite: false, delegate: { type: 'fake-ipam' } })],
});

async function confDirWith(list: unknown): Promise<{ confDir: string; conflist: string; text: string }> {
  const confDir = join(s.dir, `net.d-${Math.random().toString(16).slice(2, 8)}`);
  await mkdir(confDir);
  const conflist = join(confDir, '05-cilium.conflist');
  const text = `${JSON.stringify(list, null, 2)}\n`;
  await writeFile(conflist, text);
  return { confDir, conflist, text };
}

async function doctor(node: string, confDir: string, line: CiliumLine): Promise<{ exitCode: number; findings: any[] }> {
  const cniPath = `${await shimBinDir(s.dir)}:${ciliumCniDir(line)}:${FIXTURE_BIN}`;
  const r = await execa('ip', ['netns', 'exec', node, SHIM, 'doctor', '--conf-dir', confDir, '--cni-path', cniPath, '--json'], { reject: false });
  return { exitCode: r.exitCode ?? -1, findings: JSON.parse(r.stdout).findings ?? JSON.parse(r.stdout) };
}
const mainPlugin = (fs: any[]) => fs.filter((f) => f.check === 'main-plugin');

d('doctor: the list version against cilium-cni', () => {
  it.each([
    ['with the shim chained', true],
    ['before install (no shim entry yet)', false],
  ])("the README's old 1.1.0 list in front of cilium-cni 1.17 (%s): a PROBLEM naming both versions and 1.0.0", async (_name, chained) => {
    const node = await net.netns('node');
    const old = ciliumList('1.1.0', ['0.3.1', '1.0.0', '1.1.0']);
    const { confDir, conflist, text } = await confDirWith(chained ? withShim(old) : old);
    const r = await doctor(node, confDir, '1.17');
    expect(r.exitCode).toBe(1);
    const problem = mainPlugin(r.findings).find((f) => f.verdict === 'problem');
    expect(problem, JSON.stringify(mainPlugin(r.findings))).toBeDefined();
    expect(problem.summary).toContain(`${conflist}: cilium-cni (${ciliumCniDir('1.17')}/cilium-cni) supports up to 1.0.0`);
    expect(problem.summary).toContain('the list is at 1.1.0');
    expect(problem.summary).toContain('every ADD fails with "incompatible CNI versions"');
    expect(problem.fix).toContain('write the list at 1.0.0');
    expect(problem.data).toMatchObject({ written: '1.1.0', picked: '1.1.0', use: '1.0.0' });
    // doctor only reads.
    expect(await readFile(conflist, 'utf8')).toBe(text);
  });

  it.each([
    ['1.17', '1.0.0'],
    ['1.17', '0.3.1'],
    ['newer', '1.1.0'],
  ] as const)('cilium-cni %s and a %s list: main-plugin ok, the version taken', async (line, version) => {
    const node = await net.netns('node');
    const { confDir } = await confDirWith(withShim(ciliumList(version)));
    const r = await doctor(node, confDir, line);
    const fs = mainPlugin(r.findings);
    expect(
      fs.filter((f) => f.verdict !== 'ok'),
      JSON.stringify(fs),
    ).toEqual([]);
    expect(fs.map((f) => f.summary)).toContainEqual(expect.stringMatching(new RegExp(`: cilium-cni takes ${version.replace(/\./g, '\\.')}$`)));
  });
});

/** A node whose bin dir holds cilium-cni (the stand-in of `line`, linked where cilium-agent would copy it), or none. */
async function agentNode(n: TestNet, list: unknown, line: CiliumLine | undefined, extra: string[] = []) {
  const node = await n.netns('node');
  const { confDir, conflist, text } = await confDirWith(list);
  const binDir = join(s.dir, `bin-${Math.random().toString(16).slice(2, 8)}`);
  await mkdir(binDir);
  if (line) await symlink(join(ciliumCniDir(line), 'cilium-cni'), join(binDir, 'cilium-cni'));
  const bed = { network: 'cilium', confDir, cniPath: `${binDir}:${FIXTURE_BIN}`, cacheDir: join(s.dir, 'cache'), binDir };
  const { type: _type, ...keys } = shimKeys({ dirs: s, probeRewrite: false });
  const args = [
    ...agentArgs(AGENT, bed),
    '--interval',
    '1',
    ...(extra.includes('--no-install') ? [] : ['--shim-config', JSON.stringify(keys)]),
    ...extra,
  ];
  const proc = execa('ip', ['netns', 'exec', node, AGENT, ...args], { reject: false, buffer: false });
  n.defer(async () => {
    proc.kill('SIGKILL');
    await proc;
  });
  return { node, conflist, text, binDir, agent: followAgent(proc) };
}

const readyz = async (node: string): Promise<Record<string, any> | undefined> => {
  const r = await agentGet(node, '/readyz').catch(() => undefined);
  return r ? { status: r.status, ...(JSON.parse(r.body) as Record<string, any>) } : undefined;
};
const listVersionMetric = async (node: string) => {
  const m = parseMetrics((await agentGet(node, '/metrics')).body);
  return Object.fromEntries(['taken', 'refused', 'not-asked'].map((st) => [st, m.get(`ipam_shim_agent_list_version{state="${st}"}`)?.value]));
};

d('the agent: the list version on /readyz and in ipam_shim_agent_list_version', () => {
  it('keeps its entry out of a 1.1.0 list in front of cilium-cni 1.17 and says why; chains in once the list is 1.0.0', {
    timeout: 60_000,
  }, async () => {
    const b = await agentNode(net, ciliumList('1.1.0', ['0.3.1', '1.0.0', '1.1.0']), '1.17');
    let r: Awaited<ReturnType<typeof readyz>>;
    await waitFor('/readyz 503 list-version', async () => (r = await readyz(b.node))?.reason === 'list-version', 20_000);
    expect(r!.status).toBe(503);
    expect(r!.why).toContain('cilium-cni');
    expect(r!.why).toContain('supports up to 1.0.0');
    expect(r!.why).toContain('the list is at 1.1.0');
    expect(r!.why).toContain('use cniVersion "1.0.0"');
    expect(r!.listVersion).toMatchObject({ state: 'refused', use: '1.0.0' });
    expect(await listVersionMetric(b.node)).toEqual({ taken: 0, refused: 1, 'not-asked': 0 });
    // A few more checks (interval 1 s): the list is still byte for byte cilium-agent's.
    await new Promise((res) => setTimeout(res, 2500));
    expect(await readFile(b.conflist, 'utf8')).toBe(b.text);
    expect(b.agent.lines().some((l) => l.level === 'warn' && String(l.msg).startsWith('entry not put in: cilium-cni'))).toBe(true);

    // cilium-agent rewrites the list at 1.0.0: the watcher chains the shim in and readiness no longer names the version.
    const fixed = `${JSON.stringify(ciliumList('1.0.0'), null, 2)}\n`;
    await writeFile(`${b.conflist}.tmp`, fixed);
    await rename(`${b.conflist}.tmp`, b.conflist);
    await waitFor('the entry chained in', async () => (await readFile(b.conflist, 'utf8')).includes('"ipam-shim"'), 20_000);
    await waitFor('/readyz past list-version', async () => (r = await readyz(b.node))?.listVersion?.state === 'taken', 20_000);
    expect(r!.reason).not.toBe('list-version');
    expect(await listVersionMetric(b.node)).toEqual({ taken: 1, refused: 0, 'not-asked': 0 });
  });

  it('--no-install (Cilium writes the list, the entry in it) at 1.1.0 in front of cilium-cni 1.17: /readyz 503 list-version after a pass', {
    timeout: 60_000,
  }, async () => {
    const b = await agentNode(net, withShim(ciliumList('1.1.0', ['0.3.1', '1.0.0', '1.1.0'])), '1.17', ['--no-install']);
    let r: Record<string, any> | undefined;
    await waitFor('/readyz 503 list-version', async () => (r = await readyz(b.node))?.reason === 'list-version', 20_000);
    expect(r!.status).toBe(503);
    expect(r!.why).toContain('the list is at 1.1.0');
    expect(await listVersionMetric(b.node)).toEqual({ taken: 0, refused: 1, 'not-asked': 0 });
    expect(b.agent.lines().some((l) => l.level === 'warn' && l.listVersion === 'refused')).toBe(true);
    // Verified, never edited.
    expect(await readFile(b.conflist, 'utf8')).toBe(b.text);
  });

  it('cilium-cni not installed yet: the entry goes in, /readyz and the metric say "not-asked", never "taken"', { timeout: 60_000 }, async () => {
    // A new node: cilium-agent has written its list but not yet copied cilium-cni in.
    const b = await agentNode(net, ciliumList('1.0.0'), undefined);
    const binDir = b.binDir;
    let r: Awaited<ReturnType<typeof readyz>>;
    await waitFor('/readyz listVersion not-asked', async () => (r = await readyz(b.node))?.listVersion?.state === 'not-asked', 20_000);
    expect(r!.reason).not.toBe('list-version');
    expect(r!.listVersion.message).toContain(`could not ask cilium-cni (not in ${binDir})`);
    expect(await listVersionMetric(b.node)).toEqual({ taken: 0, refused: 0, 'not-asked': 1 });
    expect(await readFile(b.conflist, 'utf8')).toContain('"ipam-shim"');
  });
});
