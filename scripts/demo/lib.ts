// Small pieces the demo sections share: a scratch node, the shim on a CNI_PATH, the cnitool-shaped runner.
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { TestNet } from '../../test/support/net/netns.js';
import { CiliumAgentStandIn } from '../../test/support/doubles/cilium-agent.js';
import { ciliumCniDir, type CiliumLine } from '../../test/support/shim/cilium.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const SHIM = join(ROOT, 'dist/ipam-shim');
export const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
export const FIXTURE_BIN = join(ROOT, 'test/fixtures/bin');
/** Reference plugins that speak 1.1.0 (install-deps' 1.9): a 1.1.0 list's delegated IPAM gets cilium-cni's stdin as is. */
export const PLUGINS_110 = process.env.CNI_PLUGIN_DIR_110 ?? join(ROOT, '.deps/cni-plugins-1.9');
export const CNIRUN = join(ROOT, 'test/support/runtimes/cnirun.ts');
export const TSX = join(ROOT, 'node_modules/.bin/tsx');
/** The real libcni: the project's cnitool harness (tools/cnitool), built by scripts/install-deps.sh. */
export const CNITOOL = process.env.CNITOOL_BIN ?? join(ROOT, '.deps/cnitool');

/**
 * The ledger's attachments of `network` (record file names). A chained DEL keeps its record marked `deletedAt` until
 * GC sees the pod gone (src/verbs/del.ts): that is no attachment.
 */
export async function ledgerAttachments(stateDir: string, network: string): Promise<string[]> {
  const dir = join(stateDir, network, 'records');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.json') && !f.startsWith('.'));
  const live: string[] = [];
  for (const name of names) {
    const rec = JSON.parse(await readFile(join(dir, name), 'utf8').catch(() => '{}')) as { deletedAt?: string };
    if (!rec.deletedAt) live.push(name);
  }
  return live.sort();
}

export interface Stage {
  net: TestNet;
  dir: string;
  confDir: string;
  cniPath: string;
  stateDir: string;
  logFile: string;
  dataDir: string;
  cacheDir: string;
  /** Writes a conflist into confDir and returns its path. */
  conflist(name: string, body: unknown): Promise<string>;
  /** argv for the runner inside netns `node`: ['ip','netns','exec',node, tsx, cnirun, ...] */
  runner(node: string, ...args: string[]): [string, string[]];
  /** argv for the cnitool harness (the real libcni) inside netns `node`: network `name` from confDir, one attachment. */
  cnitool(node: string, verb: string, name: string, att?: { containerID: string; netns: string }): [string, string[]];
  /** The plugins' environment (CNI_PATH, NETCONFPATH, PATH; with a Cilium line, cilium-agent's socket). */
  env(): Record<string, string>;
  cleanup(): Promise<void>;
}

/**
 * A scratch node for a section. With `cilium`, that line's cilium-cni stand-in is first on the CNI path (a list
 * names it `cilium-cni`) and cilium-agent's API stand-in listens for it until cleanup; the newer line's lists are
 * at 1.1.0, so its reference plugins are PLUGINS_110 (cilium-cni hands its delegate the list's version unchanged).
 */
export async function stage(o: { cilium?: CiliumLine } = {}): Promise<Stage> {
  const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-demo-'));
  const agent = o.cilium ? await CiliumAgentStandIn.start({ socketPath: join(dir, 'cilium.sock') }) : undefined;
  const bin = join(dir, 'bin');
  await mkdir(bin);
  await symlink(SHIM, join(bin, 'ipam-shim'));
  const confDir = join(dir, 'net.d');
  await mkdir(confDir);
  const net = new TestNet();
  const s: Stage = {
    net,
    dir,
    confDir,
    cniPath: [bin, ...(o.cilium ? [ciliumCniDir(o.cilium)] : []), FIXTURE_BIN, o.cilium === 'newer' ? PLUGINS_110 : PLUGIN_DIR].join(':'),
    stateDir: join(dir, 'state'),
    logFile: join(dir, 'ipam-shim.log'),
    dataDir: join(dir, 'host-local'),
    cacheDir: join(dir, 'cache'),
    async conflist(name, body) {
      const path = join(confDir, `10-${name}.conflist`);
      await writeFile(path, JSON.stringify(body, null, 2));
      return path;
    },
    runner: (node, ...args) => ['ip', ['netns', 'exec', node, TSX, CNIRUN, ...args, '--cache-dir', s.cacheDir]],
    cnitool: (node, verb, name, att) => [
      'ip',
      [
        'netns',
        'exec',
        node,
        CNITOOL,
        '-conflist',
        confDir,
        '-name',
        name,
        '-cni-path',
        s.cniPath,
        '-cache-dir',
        s.cacheDir,
        ...(att ? ['-container-id', att.containerID, '-netns', att.netns] : []),
        verb,
      ],
    ],
    env: () => ({ NETCONFPATH: confDir, CNI_PATH: s.cniPath, PATH: process.env.PATH ?? '', ...agent?.env() }),
    async cleanup() {
      await net.cleanup();
      await agent?.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return s;
}
