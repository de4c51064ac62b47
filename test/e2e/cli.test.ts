// The operator CLI as an operator meets it: the BUILT single executable run with arguments. Help per command
// (flags described, examples), `help <command>`, `version --json` and `--version --json`, "did you mean", the
// exit-code scheme (0 fine, 1 found a problem, 2 usage, 3 could not run), `ledger`, and doctor without a shim conflist.
import { execa } from 'execa';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/effects/ledger.js';
import type { LedgerRecord } from '../../src/ledger/record.js';
import { ROOT, SEA_SHIM } from '../support/shim/cni.js';
import { ciliumCniDir } from '../support/shim/cilium.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { ErrorCode } from '../../src/cni/errors.js';

let dir = '';
const net = new TestNet();
afterEach(() => net.cleanup());
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-cli-'));
});
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const cli = (...args: string[]) =>
  execa(SEA_SHIM, args, { reject: false, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, extendEnv: false, timeout: 60_000 });

const COMMANDS = ['agent', 'agent-ip', 'completion', 'doctor', 'gc', 'install', 'ledger', 'plan', 'probe-rewrite', 'residue', 'uninstall', 'version'];

/** A conf dir with AKS's cilium conflist and the shim chained after cilium-cni, state under `dir`. */
async function node(o: { shim?: boolean } = {}) {
  const confDir = join(dir, 'net.d');
  const binDir = join(dir, 'bin');
  const stateDir = join(dir, 'state');
  await mkdir(confDir, { recursive: true });
  await mkdir(binDir, { recursive: true });
  const plugins: unknown[] = [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }];
  if (o.shim !== false) plugins.push({ type: 'ipam-shim', stateDir, logFile: join(dir, 'shim.log'), delegate: { type: 'azure-ipam' } });
  await writeFile(join(confDir, '05-cilium.conflist'), JSON.stringify({ cniVersion: '0.3.1', name: 'cilium', plugins }));
  return { confDir, binDir, stateDir };
}

describe('help', () => {
  it('--help lists every command with a one-line description and the exit-code scheme', async () => {
    const r = await cli('--help');
    expect(r.exitCode).toBe(0);
    const listed = r.stdout
      .slice(r.stdout.indexOf('commands:\n') + 10)
      .split('\n\n')[0]!
      .split('\n');
    expect(listed.map((l) => l.trim().split(/\s+/)[0])).toEqual(COMMANDS);
    for (const l of listed) expect(l, 'name, two spaces, a description').toMatch(/^ {2}[a-z-]+ {2,}\S.{20,}$/);
    expect(r.stdout).toContain('0 fine; 1 found a problem; 2 usage; 3 could not run');
  });

  it("help <command> and <command> --help print the command's help: every flag described, an example", async () => {
    for (const name of COMMANDS) {
      const a = await cli('help', name);
      const b = await cli(name, '--help');
      expect(a.exitCode, name).toBe(0);
      expect(a.stdout, name).toBe(b.stdout);
      const flags = a.stdout
        .slice(a.stdout.indexOf('\nflags:\n') + 8, a.stdout.indexOf('\n\nexamples:\n'))
        .split('\n')
        .filter(Boolean);
      // Every command prints a result for --json but the agent, whose output is its log lines (issue 37), and
      // completion, whose output is a script.
      if (name === 'agent' || name === 'completion')
        expect(
          flags.some((f) => f.startsWith('  --json ')),
          name,
        ).toBe(false);
      else expect(flags.at(-1), name).toMatch(/^ {2}--json +\S/);
      for (const f of flags) expect(f, `${name}: a flag and what it does`).toMatch(/^ {2}--[a-z0-9-]+( \S+)? {2,}\S.{10,}$/);
      const examples = a.stdout.slice(a.stdout.indexOf('\nexamples:\n') + 11, a.stdout.indexOf('\n\nexit status: ')).split('\n');
      expect(examples.length, name).toBeGreaterThanOrEqual(1);
      for (const e of examples) expect(e, name).toContain(`ipam-shim ${name}`);
      expect(a.stdout, name).toMatch(/\nexit status: .*\b0\b.*\b2 usage/);
    }
  });
});

describe('version', () => {
  it('`version --json` and `--version --json` print version, Node.js and commit; the text stays two lines', async () => {
    const ours = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const a = await cli('version', '--json');
    const b = await cli('--version', '--json');
    expect(a.exitCode, a.stderr).toBe(0);
    expect(b.exitCode, b.stderr).toBe(0);
    const j = JSON.parse(a.stdout);
    expect(JSON.parse(b.stdout)).toEqual(j);
    expect(j).toMatchObject({ version: ours.version, node: expect.stringMatching(/^v24\./), runtime: 'embedded', startupSnapshot: true });
    const head = (await execa('git', ['rev-parse', 'HEAD'], { cwd: ROOT, reject: false })).stdout.trim();
    expect(j.commit).toMatch(/^[0-9a-f]{40}(-dirty)?$/);
    // Built from this checkout (or, after a commit since the build, from an earlier one).
    if (head) expect((await execa('git', ['cat-file', '-t', j.commit.replace(/-dirty$/, '')], { cwd: ROOT, reject: false })).stdout).toBe('commit');
    const text = await cli('version');
    expect(text.stdout).toBe((await cli('--version')).stdout);
    expect(text.stdout.split('\n')[0]).toBe(`ipam-shim ${ours.version}`);
  });
});

// Issue 43, item 9: -v, -o json, completion, gc finding the network as ledger does.
describe('the spellings operators type', () => {
  it('-v is --version; -o json, -ojson, -o=json, --output json and --output=json are --json; -o text is the text; others exit 2', async () => {
    expect((await cli('-v')).stdout).toBe((await cli('--version')).stdout);
    const versionJson = JSON.parse((await cli('--version', '--json')).stdout);
    for (const spelling of [['-o', 'json'], ['-ojson'], ['-o=json'], ['--output', 'json'], ['--output=json']]) {
      const r = await cli('-v', ...spelling);
      expect(r.exitCode, `${spelling} ${r.stderr}`).toBe(0);
      expect(JSON.parse(r.stdout), spelling.join(' ')).toEqual(versionJson);
    }
    const n = await node();
    const json = await cli('ledger', '--conf-dir', n.confDir, '--json');
    const o = await cli('ledger', '-o', 'json', '--conf-dir', n.confDir);
    expect(o.exitCode, o.stderr).toBe(0);
    expect(JSON.parse(o.stdout)).toEqual(JSON.parse(json.stdout));
    expect((await cli('ledger', '--conf-dir', n.confDir, '-o', 'text')).stdout).toBe((await cli('ledger', '--conf-dir', n.confDir)).stdout);
    const yaml = await cli('ledger', '--conf-dir', n.confDir, '-o', 'yaml');
    expect(yaml.exitCode).toBe(2);
    expect(yaml.stderr.split('\n')[0]).toBe('ipam-shim ledger: -o: unknown format "yaml" (json or text)');
    const agent = await cli('agent', '-o', 'json');
    expect(agent.exitCode).toBe(2);
    expect(agent.stderr).toContain('--json: this command has no JSON output');
  });

  it('gc without --network finds the shim conflist as ledger does: a dry run, exit 0 with nothing leaked', async () => {
    const n = await node();
    const cache = join(dir, 'cache');
    await mkdir(join(cache, 'results'), { recursive: true });
    const r = await cli('gc', '--conf-dir', n.confDir, '--cache-dir', cache);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('network cilium: 0 cached attachment(s), 0 kept, 0 would be released (dry run; --apply to release)');
    const j = await cli('gc', '--conf-dir', n.confDir, '--cache-dir', cache, '-o', 'json');
    expect(JSON.parse(j.stdout)).toMatchObject({ network: 'cilium', apply: false, release: [] });
    // As with ledger: no shim conflist is "could not run" (3), naming what is missing.
    const none = await cli('gc', '--conf-dir', join(dir, 'missing'));
    expect(none.exitCode).toBe(3);
    expect(none.stderr).toMatch(/no conflist with ipam-shim found/);
  });

  it('completion bash: a script bash parses that completes commands, subcommands, flags and -o formats', async () => {
    const r = await cli('completion', 'bash');
    expect(r.exitCode, r.stderr).toBe(0);
    const script = join(dir, 'ipam-shim.bash');
    await writeFile(script, r.stdout);
    expect((await execa('bash', ['-n', script], { reject: false })).exitCode).toBe(0);
    /** What bash offers after the words typed (the last one being completed). */
    const offers = async (...words: string[]) => {
      const code = `source ${JSON.stringify(script)}; COMP_WORDS=(${words.map((w) => JSON.stringify(w)).join(' ')}); COMP_CWORD=${words.length - 1}; _ipam_shim; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const out = await execa('bash', ['-c', code]);
      return out.stdout.split('\n').filter(Boolean).sort();
    };
    expect(await offers('ipam-shim', 'res')).toEqual(['residue']);
    expect(await offers('ipam-shim', 'co')).toEqual(['completion']);
    expect(await offers('ipam-shim', '-')).toEqual(['--help', '--version', '-v']);
    expect(await offers('ipam-shim', 'residue', '')).toEqual(['clean', 'scan']);
    expect(await offers('ipam-shim', 'probe-rewrite', '')).toEqual(['ensure', 'remove', 'status']);
    expect(await offers('ipam-shim', 'agent-ip', '')).toContain('allocate');
    expect(await offers('ipam-shim', 'gc', '--a')).toEqual(['--allow-empty-cache', '--apply']);
    expect(await offers('ipam-shim', 'plan', '--no')).toEqual(['--node-mask', '--node-mask-v6', '--nodes']);
    expect(await offers('ipam-shim', 'ledger', '-o', '')).toEqual(['json', 'text']);
    expect(await offers('ipam-shim', 'agent', '--js')).toEqual([]);
    expect(await offers('ipam-shim', 'help', 'doc')).toEqual(['doctor']);
    const bad = await cli('completion', 'fish');
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.split('\n')[0]).toBe('ipam-shim completion: no completion for "fish": bash');
  });
});

describe('exit codes and suggestions', () => {
  it('a misspelt command gets "did you mean" and exit 2; an unknown flag exit 2; a command that cannot run exit 3', async () => {
    const typo = await cli('doctr');
    expect(typo.exitCode).toBe(2);
    expect(typo.stderr).toContain('did you mean "ipam-shim doctor"?');
    const typo2 = await cli('help', 'ledgr');
    expect(typo2.exitCode).toBe(2);
    expect(typo2.stderr).toContain('did you mean "ipam-shim ledger"?');
    const flag = await cli('gc', '--bogus');
    expect(flag.exitCode).toBe(2);
    const cannot = await cli('ledger', '--conf-dir', join(dir, 'missing'));
    expect(cannot.exitCode, cannot.stderr).toBe(3);
    expect(cannot.stderr).toMatch(/no conflist with ipam-shim found/);
    const cannotJson = await cli('agent-ip', 'list', '--conf-dir', join(dir, 'missing'), '--json');
    expect(cannotJson.exitCode).toBe(3);
    expect(JSON.parse(cannotJson.stdout)).toMatchObject({ code: ErrorCode.InvalidNetworkConfig });
  });
});

describe('ledger', () => {
  it('lists the attachments: pod namespace/name, addresses, owner, placement, age (text and --json); exit 0, 1 with an unreadable record', async () => {
    const n = await node();
    const ledger = new Ledger(n.stateDir, 'cilium');
    const made = new Date(Date.now() - 2 * 3600_000 - 13 * 60_000).toISOString();
    const base = {
      v: 1,
      network: 'cilium',
      state: 'attached',
      placement: 'chained',
      netns: '/run/netns/x',
      createdAt: made,
      updatedAt: made,
    } as const;
    const recs: LedgerRecord[] = [
      {
        ...base,
        containerID: '4f1c9a7e2b6d8f00a1b2c3d4e5f6071829',
        ifname: 'eth0',
        owner: 'pod',
        ips: ['10.224.1.2', 'fd00:224::1:2'],
        pod: { namespace: 'shop', name: 'web-0', uid: '0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11' },
      },
      { ...base, containerID: 'cilium-agent-health', ifname: 'eth0', owner: 'agent', placement: 'ipam', ips: ['10.224.1.3'] },
    ];
    for (const r of recs) await ledger.put(r);

    const text = await cli('ledger', '--conf-dir', n.confDir);
    expect(text.exitCode, text.stderr).toBe(0);
    const rows = text.stdout.split('\n');
    expect(rows[0]).toContain('network cilium');
    expect(rows.find((l) => l.includes('shop/web-0'))).toMatch(/eth0 +shop\/web-0 +10\.224\.1\.2,fd00:224::1:2 +pod +chained +attached +2h1[34]m$/);
    expect(rows.find((l) => l.startsWith('cilium-agent-health'))).toMatch(/10\.224\.1\.3 +agent +ipam +attached/);

    const json = await cli('ledger', '--conf-dir', n.confDir, '--json');
    const out = JSON.parse(json.stdout);
    expect(out.attachments).toHaveLength(2);
    expect(out.attachments[0]).toMatchObject({
      containerID: recs[0]!.containerID,
      pod: recs[0]!.pod,
      ips: recs[0]!.ips,
      owner: 'pod',
      placement: 'chained',
    });
    expect(out.attachments[0].ageSeconds).toBeGreaterThanOrEqual(2 * 3600 + 13 * 60);
    expect(out.unreadable).toEqual([]);

    await writeFile(join(n.stateDir, 'cilium/records/bad:eth0.json'), '{ not json');
    const bad = await cli('ledger', '--conf-dir', n.confDir);
    expect(bad.exitCode).toBe(1);
    expect(bad.stdout).toContain('UNREADABLE');
  });
});

describe('doctor', () => {
  const findings = (stdout: string) => JSON.parse(stdout).findings as Array<{ check: string; verdict: string; summary: string }>;

  it('a cluster-pool node (cilium-cni with no IPAM plugin): nothing to chain to; the fix for failure 4 is plan, not install (issue 43)', async () => {
    const n = await node({ shim: false });
    await writeFile(
      join(n.confDir, '05-cilium.conflist'),
      JSON.stringify({ cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni' }] }),
    );
    const r = await cli('doctor', '--conf-dir', n.confDir, '--cni-path', `${ciliumCniDir('1.17')}:${n.binDir}`, '--json');
    const f = findings(r.stdout);
    const conflist = f.find((x) => x.check === 'conflist') as { verdict: string; summary: string; fix?: string };
    expect(conflist).toMatchObject({ verdict: 'skipped', summary: expect.stringContaining('cilium-cni allocates through cilium-agent') });
    expect(conflist.fix).toContain('ipam-shim plan');
    expect(conflist.fix).not.toContain('ipam-shim install');
    expect(f.find((x) => x.check === 'shim-binary')).toMatchObject({ verdict: 'skipped' });
    expect(
      f.filter((x) => x.verdict === 'problem'),
      r.stdout,
    ).toEqual([]);
  });

  it('without a shim conflist: still runs what it can (main plugin, the shim binary; the IPv6 probe table described) and skips the rest; exit 1', async () => {
    const n = await node({ shim: false });
    const r = await cli('doctor', '--conf-dir', n.confDir, '--cni-path', n.binDir, '--json');
    expect(r.exitCode, r.stderr).toBe(1);
    const f = findings(r.stdout);
    expect(f.find((x) => x.check === 'conflist')).toMatchObject({
      verdict: 'problem',
      summary: expect.stringContaining('no conflist with ipam-shim'),
    });
    expect(f.find((x) => x.check === 'main-plugin')).toMatchObject({ verdict: 'problem', summary: expect.stringContaining('cilium-cni') });
    // No list names the shim: its absence costs no ADD (the conflist check says to install it).
    expect(f.find((x) => x.check === 'shim-binary')).toMatchObject({ verdict: 'skipped', summary: expect.stringContaining('no list names it') });
    // The probe table is looked at and described, but not judged: without a shim conflist the shim hands out no IPv6 address (issue 37).
    expect(f.find((x) => x.check === 'ipv6-probe')).toMatchObject({ verdict: 'skipped', summary: expect.stringContaining('(now: ') });
    expect(f.find((x) => x.check === 'ledger')).toMatchObject({ verdict: 'skipped' });
    const text = await cli('doctor', '--conf-dir', n.confDir, '--cni-path', n.binDir);
    expect(text.stdout.split('\n').length).toBeGreaterThan(8);
  });

  (rootOrSkip() ? it : it.skip)(
    'without a shim conflist: residue still finds orphaned per-pod ebtables rules (a node of its own: a netns)',
    async () => {
      const n = await node({ shim: false });
      const ns = await net.netns('doc');
      await inNs(ns, 'ebtables', [
        '-t',
        'nat',
        '-A',
        'PREROUTING',
        '-p',
        'IPv4',
        '-i',
        'eth0',
        '--ip-dst',
        '10.224.9.9',
        '-j',
        'dnat',
        '--to-dst',
        '0:d:3a:30:47:42',
        '--dnat-target',
        'ACCEPT',
      ]);
      const r = await execa('ip', ['netns', 'exec', ns, SEA_SHIM, 'doctor', '--conf-dir', n.confDir, '--cni-path', n.binDir, '--json'], {
        reject: false,
      });
      expect(r.exitCode, r.stderr).toBe(1);
      expect(findings(r.stdout).find((x) => x.check === 'residue')).toMatchObject({
        verdict: 'warn',
        summary: expect.stringContaining('10.224.9.9'),
      });
    },
  );

  it('checks the main plugin the shim is chained after: missing from the CNI path is a problem, found is ok', async () => {
    const n = await node();
    const missing = findings((await cli('doctor', '--conf-dir', n.confDir, '--cni-path', n.binDir, '--json')).stdout);
    expect(missing.find((x) => x.check === 'main-plugin')).toMatchObject({
      verdict: 'problem',
      summary: expect.stringMatching(/^cilium-cni, listed in .*05-cilium\.conflist, is not on the CNI path/),
    });
    await writeFile(join(n.binDir, 'cilium-cni'), '#!/bin/sh\nexit 0\n');
    await chmod(join(n.binDir, 'cilium-cni'), 0o755);
    const found = findings((await cli('doctor', '--conf-dir', n.confDir, '--cni-path', n.binDir, '--json')).stdout);
    expect(found.find((x) => x.check === 'main-plugin')).toMatchObject({
      verdict: 'ok',
      summary: expect.stringContaining(join(n.binDir, 'cilium-cni')),
    });
  });
});
