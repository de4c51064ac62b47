// The CNS stand-in (test/fixtures/bin/cns-standin.cjs) as the suites drive it, and the azure-ipam stand-in's
// delegate config pointed at it. What both copy from the public source: docs/testing.md ("azure-ipam and CNS
// stand-ins").
import { execa } from 'execa';
import { request } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FIXTURE_BIN } from '../paths.js';
import { waitFor } from '../wait.js';

/** CNS's key: `K8S_POD_NAME:K8S_POD_NAMESPACE` (CNS < 1.7.0 by default) or the container ID (CNS ≥ 1.7.0, and
 * older ones that initialize from CNI or manage endpoint state). */
export type CnsScheme = 'pod' | 'container';
export const CNS_SCHEMES: readonly CnsScheme[] = ['pod', 'container'];

/** One family's addresses: `first`–`last` inside `subnet` (whose prefix length the results carry). */
export interface CnsPool {
  subnet: string;
  first: string;
  last: string;
  /** The NC's gateway CNS reports (IPv4); none by default. */
  gateway?: string;
}

/** A pod as CNS's provider lists it at a restart (the API server's view, or CNI's state). */
export interface CnsPod {
  ip: string;
  podName?: string;
  podNamespace?: string;
  containerID?: string;
}

export interface CnsRequest {
  path: '/network/requestipconfigs' | '/network/releaseipconfigs';
  key: string | null;
  body: { podInterfaceID: string; infraContainerID: string; orchestratorContext: { podName: string; podNamespace: string }; ifname: string };
  returnCode: number;
}

export type CnsMode = 'up' | 'down' | 'slow';

export interface CnsOptions {
  scheme: CnsScheme;
  pools: CnsPool[];
  /** A scratch directory for its config, store and control socket. */
  dir: string;
  /** The network namespace to serve in (plugins run there under `ip netns exec`): its own loopback. */
  netns?: string;
  /** `slow` answers after this (default 16 s: past azure-ipam's 15 s). */
  slowMs?: number;
  /** Called with the stop function so a failing test still stops it (e.g. `net.defer`). */
  onCleanup?: (stop: () => Promise<void>) => void;
}

/** azure-ipam's address of CNS and where its DEL queues, as the stand-in's own config keys carry them. */
export interface AzureIpamTarget {
  url: string;
  deleteIDsDir?: string;
  cnsTimeoutMs?: number;
}

/**
 * `conf` (a delegate's or a plugin's `ipam` config) turned into one for the azure-ipam stand-in over `cns`: the type
 * becomes `azure-ipam`, and the stand-in-only keys name the CNS and the delete queue; every other key is kept (the
 * real azure-ipam ignores them).
 */
export function overAzureIpam(conf: Record<string, unknown>, cns: AzureIpamTarget): Record<string, unknown> {
  return {
    ...conf,
    type: 'azure-ipam',
    cnsUrl: cns.url,
    ...(cns.deleteIDsDir ? { deleteIDsDir: cns.deleteIDsDir } : {}),
    ...(cns.cnsTimeoutMs ? { cnsTimeoutMs: cns.cnsTimeoutMs } : {}),
  };
}

/** A running CNS stand-in. */
export class CnsStandin implements AzureIpamTarget {
  private constructor(
    private readonly stopFn: () => Promise<void>,
    readonly port: number,
    readonly control: string,
    readonly storeFile: string,
    readonly deleteIDsDir: string,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts one and waits (bounded) until it listens. */
  static async start(o: CnsOptions): Promise<CnsStandin> {
    const configFile = join(o.dir, `cns-${o.scheme}.json`);
    const control = join(o.dir, `cns-${o.scheme}.sock`);
    const storeFile = join(o.dir, `cns-${o.scheme}-store.json`);
    const deleteIDsDir = join(o.dir, 'deleteIDs');
    await writeFile(
      configFile,
      JSON.stringify({ host: '127.0.0.1', port: 0, control, store: storeFile, scheme: o.scheme, slowMs: o.slowMs, pools: o.pools }),
    );
    const script = join(FIXTURE_BIN, 'cns-standin.cjs');
    const argv = o.netns ? ['ip', ['netns', 'exec', o.netns, process.execPath, script, configFile]] : [process.execPath, [script, configFile]];
    const proc = execa(argv[0] as string, argv[1] as string[], { reject: false, buffer: false });
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const stop = async () => {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 3000);
      await proc;
      clearTimeout(t);
    };
    o.onCleanup?.(stop);
    try {
      await waitFor('the CNS stand-in to listen', () => out.includes('"ready":true') || proc.exitCode !== null, 10_000, 20);
      const line = out.split('\n').find((l) => l.includes('"ready":true'));
      if (!line) throw new Error(`the CNS stand-in did not start: ${out}`);
      const { port } = JSON.parse(line) as { port: number };
      return new CnsStandin(stop, port, control, storeFile, deleteIDsDir);
    } catch (e) {
      await stop();
      throw e;
    }
  }

  /** What each key holds now. */
  async holdings(): Promise<Record<string, string[]>> {
    return ((await this.call('GET', '/holdings')) as { holdings: Record<string, string[]> }).holdings;
  }

  /** Every address held, sorted. */
  async held(): Promise<string[]> {
    return Object.values(await this.holdings())
      .flat()
      .sort();
  }

  /** The key holding `ip`, if any. */
  async holderOf(ip: string): Promise<string | undefined> {
    return Object.entries(await this.holdings()).find(([, ips]) => ips.includes(ip))?.[0];
  }

  /** Every request the API answered, in order. */
  async requests(): Promise<CnsRequest[]> {
    return (await this.call('GET', '/requests')) as CnsRequest[];
  }

  /** `down`: connections refused; `slow`: answers after slowMs; `up`. */
  async setMode(mode: CnsMode): Promise<void> {
    await this.call('POST', '/mode', { mode });
  }

  /** CNS restarted: its assignments rebuilt from `pods` (the provider's view) or from its own store. */
  async restart(from: { pods: CnsPod[] } | 'store'): Promise<void> {
    await this.call('POST', '/restart', from === 'store' ? { from: 'store' } : { from: 'pods', pods: from.pods });
  }

  async stop(): Promise<void> {
    await this.stopFn();
  }

  private call(method: string, path: string, body?: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: this.control, method, path, headers: { 'Content-Type': 'application/json' }, timeout: 10_000 }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          const json = JSON.parse(text) as { error?: string };
          if (res.statusCode !== 200) reject(new Error(`CNS stand-in ${method} ${path}: ${json.error ?? text}`));
          else resolve(json);
        });
      });
      req.on('timeout', () => req.destroy(new Error(`CNS stand-in ${method} ${path}: no answer in 10 s`)));
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A conflist (e.g. one of conflist/aks-*.conflist) with every azure-ipam config in it — a plugin's `ipam`, the shim's
 * `delegate` (chained, or the shim in the IPAM slot) — pointed at the azure-ipam stand-in over `cns`; a copy, every
 * other key as it was. For suites that run the shipped AKS lists (a main plugin must still stand in for cilium-cni).
 */
export function withAzureIpamStandin<T extends Json>(list: T, cns: AzureIpamTarget): T {
  const out = structuredClone(list);
  const fix = (holder: Json, key: 'ipam' | 'delegate') => {
    const conf = holder[key];
    if (!isObject(conf)) return;
    if (conf.type === 'azure-ipam') holder[key] = overAzureIpam(conf, cns);
    else if (conf.type === 'ipam-shim') fix(conf, 'delegate');
  };
  for (const p of (out.plugins as unknown[] | undefined) ?? []) {
    if (!isObject(p)) continue;
    fix(p, 'ipam');
    if (p.type === 'ipam-shim') fix(p, 'delegate');
  }
  return out;
}
