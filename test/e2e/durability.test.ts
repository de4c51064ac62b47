// fsync only where it buys durability (docs/failure-model.md "Durability"): the built executable under
// `strace -f`, against Debian's host-local. A pod's ADD and DEL (intent record, attached record, IP index entries,
// their removal, the delegate VERSION cache) are atomic but not fsynced: their durability is the page cache's, as
// host-local's own store is. The agent's own IPs (`agent-ip`, records of owner `agent`) are fsynced: they must
// outlive a reboot. And the CNI verb path loads no node:crypto (temp names need no random bytes).
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PLUGIN_DIR, ROOT, SHIM, hostLocalAllocations, ledgerRecords, scratch } from '../support/shim/cni.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { hostLocal, shimConf, shimKeys } from '../support/shim/conf.js';

const STRACE = ['/usr/bin/strace', '/bin/strace'].find((p) => existsSync(p));
if (!STRACE && process.env.CI === 'true') throw new Error('CI must have strace (scripts/install-deps.sh installs it)');
if (!STRACE) console.warn('skipping the fsync tests: strace is not installed (scripts/install-deps.sh installs it)');
const root = rootOrSkip();
/** Every call that asks the kernel to put data on disk. */
const SYNC_CALLS = 'trace=fsync,fdatasync,sync,syncfs,sync_file_range';

let s: Awaited<ReturnType<typeof scratch>>;
let owners: string[] = [];
beforeEach(async () => {
  s = await scratch();
  owners = [];
});
afterEach(async () => {
  for (const owner of owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
  await s.cleanup();
});

interface Traced {
  exitCode: number;
  stdout: string;
  /** The sync calls of the process and everything it started, as strace prints them (`-y`: with the file's path). */
  syncs: string[];
}

/** Runs `argv` under `strace -f` with `env` only (as a runtime does), feeding `input`. */
async function traced(argv: string[], env: Record<string, string>, input = ''): Promise<Traced> {
  const out = join(s.dir, `strace-${uid()}.txt`);
  const r = await execa(STRACE!, ['-f', '-qq', '-y', '-e', SYNC_CALLS, '-e', 'signal=none', '-o', out, ...argv], {
    input,
    env: { PATH: process.env.PATH!, ...env },
    extendEnv: false,
    reject: false,
    timeout: 60_000,
  });
  const text = existsSync(out) ? await readFile(out, 'utf8') : '';
  return {
    exitCode: r.exitCode ?? -1,
    stdout: r.stdout,
    syncs: text.split('\n').filter((l) => /\b(fsync|fdatasync|sync|syncfs|sync_file_range)\(/.test(l)),
  };
}

const delegate = () => hostLocal(s.dataDir, '10.98.0.0/24', 'fd00:98::/120');
const cniEnv = (command: string, containerID: string) => ({
  CNI_COMMAND: command,
  CNI_CONTAINERID: containerID,
  CNI_NETNS: `/var/run/netns/${containerID}`,
  CNI_IFNAME: 'eth0',
  CNI_ARGS: '',
  CNI_PATH: PLUGIN_DIR,
});

describe.skipIf(!STRACE)('fsync where it buys durability, and only there', () => {
  it('a pod ADD and DEL in the IPAM slot (dual-stack, over host-local) call no fsync at all', async () => {
    // In the host's namespace (as ipam-slot.test.ts): the probe rewrite would install a table on the host.
    const conf = JSON.stringify(shimConf({ name: 'durnet', dirs: s, probeRewrite: false, delegate: delegate() }));
    const add = await traced([SHIM], cniEnv('ADD', 'dur-pod'), conf);
    expect(add.exitCode, add.stdout).toBe(0);
    expect(JSON.parse(add.stdout).ips).toHaveLength(2);
    expect(await ledgerRecords(s.stateDir, 'durnet')).toEqual(['dur-pod:eth0.json']);
    const del = await traced([SHIM], cniEnv('DEL', 'dur-pod'), conf);
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, 'durnet')).toEqual([]);
    expect(await hostLocalAllocations(s.dataDir, 'durnet')).toEqual([]);
    // The delegate VERSION cache was written by one of them (the first call that found the state dir).
    expect(existsSync(join(s.stateDir, '.delegate-versions', 'host-local.json'))).toBe(true);
    expect(add.syncs).toEqual([]);
    expect(del.syncs).toEqual([]);
  });

  it.skipIf(!root)("an agent IP's allocation and release are fsynced (its record, its index entries, their removal)", async () => {
    const owner = `dur${uid(6)}`;
    owners.push(owner);
    const network = `dura${uid(4)}`;
    const ipam = delegate();
    const confList = {
      cniVersion: '1.0.0',
      name: network,
      // Run on the host: no cure may act here (allocate runs every fix's, the IPv6 probe rewrite included).
      plugins: [
        { type: 'ptp', ipMasq: false, ipam },
        shimKeys({ dirs: s, probeRewrite: false, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam }),
      ],
    };
    await mkdir(join(s.dir, 'net.d'));
    const conflist = join(s.dir, 'net.d', '10-dur.conflist');
    await writeFile(conflist, JSON.stringify(confList));
    const cli = (action: string) =>
      traced([SHIM, 'agent-ip', action, '--owner', owner, '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--json'], {});

    const records = join(s.stateDir, network, 'records');
    const ips = join(s.stateDir, network, 'ips');
    const alloc = await cli('allocate');
    expect(alloc.exitCode, alloc.stdout).toBe(0);
    const allocated = JSON.parse(alloc.stdout).ips as string[];
    expect(allocated).toHaveLength(2);
    /** fsyncs of files whose path starts with `prefix`; of the directory itself with `${dir}>`. */
    const fsyncOf = (t: Traced, prefix: string) => t.syncs.filter((l) => l.includes(`<${prefix}`));
    // The record (intent, then attached) and each index entry: the temp file, then the directory.
    expect(fsyncOf(alloc, join(records, `.cilium-agent-${owner}:eth0.json.`)), alloc.syncs.join('\n')).toHaveLength(2);
    expect(fsyncOf(alloc, `${records}>`)).toHaveLength(2);
    for (const ip of allocated) expect(fsyncOf(alloc, join(ips, `.${ip.replaceAll(':', '_')}.`))).toHaveLength(1);
    expect(fsyncOf(alloc, `${ips}>`)).toHaveLength(allocated.length);

    const release = await cli('release');
    expect(release.exitCode, release.stdout).toBe(0);
    expect(JSON.parse(release.stdout).released).toEqual(allocated);
    // The removals: the records directory once, the index directory once per address.
    expect(fsyncOf(release, `${records}>`), release.syncs.join('\n')).toHaveLength(1);
    expect(fsyncOf(release, `${ips}>`)).toHaveLength(allocated.length);
  });
});

describe('the CNI verb path and node:crypto', () => {
  it('an ADD and a DEL of the bundle load none of node:crypto', async () => {
    // The bundle run by this Node: the single executable's startup snapshot holds whatever src/warm.ts loads.
    const hook = join(s.dir, 'crypto-hook.cjs');
    const report = join(s.dir, 'crypto-modules');
    await writeFile(
      hook,
      `process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(report)}, process.moduleLoadList.filter((m) => /crypto/.test(m)).join(',') + '\\n'));\n`,
    );
    const conf = JSON.stringify(shimConf({ name: 'durcrypto', dirs: s, probeRewrite: false, delegate: delegate() }));
    for (const command of ['ADD', 'DEL']) {
      const r = await execa(process.execPath, ['--require', hook, join(ROOT, 'dist/ipam-shim.js')], {
        input: conf,
        env: { PATH: process.env.PATH!, ...cniEnv(command, 'dur-crypto') },
        extendEnv: false,
        reject: false,
      });
      expect(r.exitCode, r.stdout).toBe(0);
    }
    // One line per run: the crypto modules it had loaded when it exited.
    expect((await readFile(report, 'utf8')).split('\n').slice(0, -1)).toEqual(['', '']);
  });
});
