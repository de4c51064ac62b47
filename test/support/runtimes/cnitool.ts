// The real libcni as a test runtime: tools/cnitool (built from Debian's Go and libcni 1.3 by
// scripts/build-cnitool.sh) driven with the same calls as the TypeScript runner (test/support/runtimes/runner.ts), so a
// suite can run through either. Every runtime decision (config version, prevResult, cache, GC's DELs, STATUS)
// is libcni's; this file only spawns the harness, and reads back libcni's cache and the harness's trace.
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Attachment, CacheEntry, CniRunnerOptions, GcReport, Invocation, JsonObject, RuntimeOpts } from './runner.js';
import { DEFAULT_CACHE_DIR, pickConfigVersion, readCacheEntry } from './runner.js';
import { ROOT } from '../shim/cni.js';

/** The harness binary: CNITOOL_BIN, else what scripts/build-cnitool.sh links at .deps/cnitool. */
export const CNITOOL = process.env.CNITOOL_BIN ?? path.join(ROOT, '.deps/cnitool');

/** Why the harness cannot run here, or undefined. Under CI a missing harness is a failure, never a skip. */
export function harnessMissing(): string | undefined {
  return existsSync(CNITOOL) ? undefined : `${CNITOOL} is missing: run "bash scripts/build-cnitool.sh" (install-deps does)`;
}

/** A failed harness call: the CNI error object libcni returned (a plugin's, or its own with code 0). */
export class HarnessError extends Error {
  readonly code: number;
  readonly msg: string;
  readonly details: string | undefined;
  /** libcni's whole message (with its "plugin type=… failed (add):" prefix). */
  readonly error: string;
  /** GC: each joined error's message. */
  readonly errors: string[];
  readonly exitCode: number;
  readonly stderr: string;
  constructor(p: { code: number; msg: string; details?: string; error: string; errors?: string[]; exitCode: number; stderr: string }) {
    super(p.error);
    this.name = 'HarnessError';
    this.code = p.code;
    this.msg = p.msg;
    this.details = p.details;
    this.error = p.error;
    this.errors = p.errors ?? [];
    this.exitCode = p.exitCode;
    this.stderr = p.stderr;
  }
}

interface TraceLine {
  plugin: string;
  pluginPath: string;
  env: Invocation['env'];
  stdin: JsonObject;
  stdout: string;
  stderr: string;
  error?: string;
}

interface LibcniAttachment {
  ContainerID: string;
  Network: string;
  IfName: string;
  Config: string;
  NetNS: string;
  CniArgs: Array<[string, string]> | null;
  CapabilityArgs: JsonObject | null;
}

let serial = 0;

/** The runner's API over the real libcni. */
export class CnitoolRuntime {
  readonly kind = 'libcni' as const;
  readonly name: string;
  /** What libcni will pick (the same rule as the runner's; the harness never depends on this value). */
  readonly cniVersion: string;
  readonly pluginDirs: string[];
  readonly cacheDir: string;
  /** Every plugin execution, oldest first, from the harness's trace (the runner's Invocation shape). */
  readonly invocations: Invocation[] = [];
  private readonly conflist: string;
  private readonly trace: string;
  private readonly env: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly netns: string | undefined;

  constructor(opts: CniRunnerOptions) {
    const missing = harnessMissing();
    if (missing) throw new Error(missing);
    const list = opts.confList;
    this.name = String(list.name);
    this.cniVersion = pickConfigVersion(list);
    this.pluginDirs = opts.pluginDirs;
    // Its conflist and trace files live beside the cache: a test names a scratch cache, never the host's.
    if (!opts.cacheDir || path.resolve(opts.cacheDir) === DEFAULT_CACHE_DIR)
      throw new Error('CnitoolRuntime needs a scratch cacheDir, not the host cache');
    this.cacheDir = opts.cacheDir;
    this.env = opts.env ?? {};
    this.timeoutMs = opts.timeoutMs ?? 120_000;
    this.netns = opts.netns;
    // The conflist is a file, as a runtime reads it; libcni caches its bytes.
    const bytes = opts.confListBytes === undefined ? Buffer.from(JSON.stringify(list)) : Buffer.from(opts.confListBytes);
    const dir = path.join(this.cacheDir, 'harness');
    mkdirSync(dir, { recursive: true });
    const id = `${process.pid}-${++serial}-${createHash('sha256').update(bytes).digest('hex').slice(0, 12)}`;
    this.conflist = path.join(dir, `${id}.conflist`);
    this.trace = path.join(dir, `${id}.trace`);
    writeFileSync(this.conflist, bytes);
  }

  cacheFilePath(containerID: string, ifname = 'eth0'): string {
    return path.join(this.cacheDir, 'results', `${this.name}-${containerID}-${ifname}`);
  }

  async add(containerID: string, netns: string, ifname = 'eth0', opts?: RuntimeOpts['args'] | RuntimeOpts): Promise<JsonObject> {
    return JSON.parse(await this.run('add', this.rtFlags(containerID, netns, ifname, opts))) as JsonObject;
  }

  async check(containerID: string, netns: string, ifname = 'eth0', opts?: RuntimeOpts['args'] | RuntimeOpts): Promise<void> {
    await this.run('check', this.rtFlags(containerID, netns, ifname, opts));
  }

  async del(containerID: string, netns: string, ifname = 'eth0', opts?: RuntimeOpts['args'] | RuntimeOpts): Promise<void> {
    await this.run('del', this.rtFlags(containerID, netns, ifname, opts));
  }

  /**
   * libcni's GCNetworkList; `valid` undefined passes no GCArgs (the keys absent), null GCArgs with a nil slice
   * (`-valid null`: the keys null, as CRI-O's ocicni sends when no pod of the network survived). libcni reports
   * nothing but errors: `deleted` is what left this network's cache, `gcSent` whether the trace shows a GC verb.
   */
  async gc(valid?: Attachment[] | null): Promise<GcReport> {
    const key = (a: { containerID: string; ifname: string }) => `${a.containerID}\0${a.ifname}`;
    const before = (await this.cachedAttachments()).filter((c) => c.networkName === this.name);
    const seen = this.invocations.length;
    const flags =
      valid === undefined
        ? []
        : ['-valid', valid === null ? 'null' : JSON.stringify(valid.map((a) => ({ containerID: a.containerID, ifname: a.ifname })))];
    let failure: unknown;
    await this.run('gc', flags).catch((e: unknown) => {
      failure = e;
    });
    const after = new Set((await this.cachedAttachments()).map((c) => key({ containerID: c.containerId, ifname: c.ifName })));
    const deleted = before.map((c) => ({ containerID: c.containerId, ifname: c.ifName })).filter((a) => !after.has(key(a)));
    if (failure) throw Object.assign(failure as HarnessError, { deleted });
    const gcSent = this.invocations.slice(seen).some((i) => i.command === 'GC');
    return { deleted, gcSent, disabled: false };
  }

  async status(): Promise<void> {
    await this.run('status', []);
  }

  async version(pluginType: string): Promise<{ cniVersion: string; supportedVersions: string[] }> {
    return JSON.parse(await this.run('version', ['-plugin', pluginType], false)) as { cniVersion: string; supportedVersions: string[] };
  }

  /** libcni GetCachedAttachments(""), in the runner's CacheEntry shape. */
  async cachedAttachments(): Promise<CacheEntry[]> {
    const atts = JSON.parse(await this.run('cached', [], false)) as LibcniAttachment[];
    return atts.map((a) => ({
      kind: 'cniCacheV1',
      containerId: a.ContainerID,
      config: a.Config,
      ifName: a.IfName,
      networkName: a.Network,
      ...(a.NetNS ? { netns: a.NetNS } : {}),
      ...(a.CniArgs ? { cniArgs: a.CniArgs } : {}),
      ...(a.CapabilityArgs ? { capabilityArgs: a.CapabilityArgs } : {}),
    }));
  }

  /** The cache file libcni wrote for an attachment, or undefined. */
  cacheEntry(containerID: string, ifname = 'eth0'): Promise<CacheEntry | undefined> {
    return readCacheEntry(this.cacheFilePath(containerID, ifname));
  }

  private rtFlags(containerID: string, netns: string, ifname: string, a: RuntimeOpts['args'] | RuntimeOpts | undefined): string[] {
    const o: RuntimeOpts = typeof a === 'string' || Array.isArray(a) ? { args: a } : (a ?? {});
    const args = Array.isArray(o.args) ? o.args.map(([k, v]) => `${k}=${v}`).join(';') : (o.args ?? '');
    const flags = ['-container-id', containerID, '-netns', netns, '-ifname', ifname];
    if (args) flags.push('-args', args);
    if (o.capabilityArgs) flags.push('-cap-args', JSON.stringify(o.capabilityArgs));
    return flags;
  }

  /** One harness call; resolves with its stdout, rejects with a HarnessError. */
  private async run(verb: string, flags: string[], traced = true): Promise<string> {
    const argv = ['-conflist', this.conflist, '-cni-path', this.pluginDirs.join(':'), '-cache-dir', this.cacheDir, ...flags];
    // Each call gets its own trace file: parallel calls (the concurrency suite) never share one.
    const trace = `${this.trace}.${++serial}`;
    if (traced) argv.push('-trace', trace);
    argv.push(verb);
    const [file, args] = this.netns ? ['ip', ['netns', 'exec', this.netns, CNITOOL, ...argv]] : [CNITOOL, argv];
    const r = await execa(file, args, {
      env: { ...process.env, ...this.env },
      extendEnv: false,
      reject: false,
      timeout: this.timeoutMs,
      encoding: 'utf8',
    });
    if (traced) await this.collect(trace);
    const stdout = String(r.stdout ?? '');
    if (r.exitCode === 0) return stdout;
    let o: { code?: number; msg?: string; details?: string; error?: string; errors?: string[] } | undefined;
    try {
      o = JSON.parse(stdout);
    } catch {
      o = undefined;
    }
    if (r.exitCode !== 1 || !o)
      throw new Error(`cnitool ${verb} exited ${r.exitCode ?? r.signal}${r.timedOut ? ' (timed out)' : ''}: ${stdout}${String(r.stderr ?? '')}`);
    throw new HarnessError({
      code: o.code ?? 0,
      msg: o.msg ?? '',
      details: o.details,
      error: o.error ?? '',
      errors: o.errors,
      exitCode: r.exitCode,
      stderr: String(r.stderr ?? ''),
    });
  }

  private async collect(trace: string): Promise<void> {
    let text: string;
    try {
      text = await readFile(trace, 'utf8');
    } catch {
      return; // no plugin was run
    }
    await rm(trace, { force: true });
    for (const l of text.split('\n').filter(Boolean)) {
      const t = JSON.parse(l) as TraceLine;
      this.invocations.push({
        plugin: t.plugin,
        pluginPath: t.pluginPath,
        command: t.env.CNI_COMMAND,
        env: pickEnv(t.env),
        stdin: t.stdin,
        stdout: t.stdout,
        stderr: t.stderr,
        exitCode: t.error === undefined ? 0 : undefined,
        durationMs: 0,
      });
    }
  }
}

function pickEnv(e: Invocation['env']): Invocation['env'] {
  return {
    CNI_COMMAND: e.CNI_COMMAND,
    CNI_CONTAINERID: e.CNI_CONTAINERID,
    CNI_NETNS: e.CNI_NETNS,
    CNI_IFNAME: e.CNI_IFNAME,
    CNI_ARGS: e.CNI_ARGS,
    CNI_PATH: e.CNI_PATH,
  };
}
