// Invoke the BUILT plugin (dist/) the way a runtime does: env + stdin, JSON on stdout, an exit code.
import { execa } from 'execa';
import { mkdtemp, rm, readdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT } from '../paths.js';

// Where the suites also find them (support/paths.ts owns them).
export { FIXTURE_BIN, PLUGIN_DIR, ROOT };
/**
 * The plugin under test: the single executable by default, what a node runs (started from its startup snapshot,
 * whose warm-up state the bundle never exercises); IPAM_SHIM_BIN tests another build, e.g. dist/ipam-shim.js.
 */
export const SHIM = process.env.IPAM_SHIM_BIN ?? join(ROOT, 'dist/ipam-shim');
/** The single executable of that build (the same file unless IPAM_SHIM_BIN names a bundle). */
export const SEA_SHIM = SHIM.replace(/ipam-shim\.js$/, 'ipam-shim');
/** The bundle of that build, for `node` (dist/ipam-shim.js). */
export const BUNDLE_SHIM = SEA_SHIM.replace(/ipam-shim$/, 'ipam-shim.js');

if (!existsSync(SHIM)) throw new Error(`${SHIM} is missing: run "npm run build" first (npm test does)`);

export interface Invocation {
  command: string;
  containerID?: string;
  netns?: string;
  ifname?: string;
  args?: string;
  path?: string[];
  env?: Record<string, string>;
  /** Plain execa call through `ip netns exec` when set. */
  inNetns?: string;
  timeoutMs?: number;
  /** Another build to invoke than SHIM (e.g. SEA_SHIM). */
  bin?: string;
}

export interface PluginOutput {
  exitCode: number;
  stdout: string;
  stderr: string;
  json: any;
}

export async function invoke(conf: unknown, inv: Invocation): Promise<PluginOutput> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: inv.command,
    CNI_CONTAINERID: inv.containerID ?? '',
    CNI_NETNS: inv.netns ?? '',
    CNI_IFNAME: inv.ifname ?? '',
    CNI_ARGS: inv.args ?? '',
    CNI_PATH: (inv.path ?? [PLUGIN_DIR, FIXTURE_BIN]).join(':'),
    ...inv.env,
  };
  const input = typeof conf === 'string' ? conf : JSON.stringify(conf);
  const shim = inv.bin ?? SHIM;
  const [file, args] = inv.inNetns ? ['ip', ['netns', 'exec', inv.inNetns, shim]] : [shim, []];
  return pluginOutput(await execa(file, args as string[], { input, env, extendEnv: false, reject: false, timeout: inv.timeoutMs ?? 60_000 }));
}

/** A finished run of the shim as the tests read it: stdout parsed as JSON, undefined where it is not JSON. */
export function pluginOutput(r: { exitCode?: number; stdout: string; stderr: string }): PluginOutput {
  let json: any;
  try {
    json = r.stdout ? JSON.parse(r.stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr, json };
}

/** A temp dir tree for one test: state, logs, host-local data. Removed by cleanup(). */
export async function scratch(): Promise<{ dir: string; stateDir: string; logFile: string; dataDir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-test-'));
  return {
    dir,
    stateDir: join(dir, 'state'),
    logFile: join(dir, 'shim.log'),
    dataDir: join(dir, 'host-local'),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** host-local's allocations for a network: IP → "containerID\r\nifname" files (lock/last_reserved excluded). */
export async function hostLocalAllocations(dataDir: string, network: string): Promise<string[]> {
  try {
    return (await readdir(join(dataDir, network))).filter((f) => f !== 'lock' && !f.startsWith('last_reserved_ip')).sort();
  } catch {
    return [];
  }
}

/**
 * The shim's ledger records of attachments for a network (file names). A chained record the runtime DELed is no
 * attachment: it stays, marked, until GC sees the pod gone (src/verbs/del.ts markDeleted); `deletedRecords` lists those.
 */
export async function ledgerRecords(stateDir: string, network: string): Promise<string[]> {
  return (await recordFiles(stateDir, network)).filter((f) => !f.deleted).map((f) => f.name);
}

/** The chained records the runtime DELed and GC has not settled yet (file names). */
export async function deletedRecords(stateDir: string, network: string): Promise<string[]> {
  return (await recordFiles(stateDir, network)).filter((f) => f.deleted).map((f) => f.name);
}

async function recordFiles(stateDir: string, network: string): Promise<Array<{ name: string; deleted: boolean }>> {
  const dir = join(stateDir, network, 'records');
  let names: string[];
  try {
    names = (await readdir(dir)).filter((f) => f.endsWith('.json') && !f.startsWith('.')).sort();
  } catch {
    return [];
  }
  return Promise.all(
    names.map(async (name) => {
      const text = await readFile(join(dir, name), 'utf8').catch(() => '{}');
      let deleted = false;
      try {
        deleted = Boolean(JSON.parse(text).deletedAt);
      } catch {}
      return { name, deleted };
    }),
  );
}

/** A plugin directory holding the shim as `ipam-shim`, for CNI_PATH (main plugins find their IPAM there). */
export async function shimBinDir(dir: string): Promise<string> {
  const { mkdir, symlink } = await import('node:fs/promises');
  const bin = join(dir, 'bin');
  await mkdir(bin, { recursive: true });
  await symlink(SHIM, join(bin, 'ipam-shim'));
  return bin;
}

/**
 * `ipam-shim gc --apply --json --grace-seconds 0` on a node (netns `node`), as an operator or the agent's GC runs it
 * from the runtime's cache; fails the test unless it exits 0, and returns its JSON report.
 */
export async function gcApplyOnNode(o: { node: string; conflist: string; cacheDir: string; cniPath: string[] }): Promise<any> {
  const args = [
    'gc',
    '--conflist',
    o.conflist,
    '--cache-dir',
    o.cacheDir,
    '--cni-path',
    o.cniPath.join(':'),
    '--grace-seconds',
    '0',
    '--json',
    '--apply',
  ];
  const r = await execa('ip', ['netns', 'exec', o.node, SHIM, ...args], { reject: false });
  if (r.exitCode !== 0) throw new Error(`ipam-shim gc exited ${r.exitCode}: ${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout);
}
