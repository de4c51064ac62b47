// Runs the wrapped IPAM plugin the way libcni's invoke package does: found on CNI_PATH, the caller's
// environment with CNI_COMMAND changed, the config on stdin, its own error objects passed through unchanged.
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CniError, ErrorCode } from '../cni/errors.js';
import { parseResult, convertResult, refuseBadAddresses, type Result } from '../cni/result.js';
import { bridgeVersion, LATEST_VERSION } from '../cni/versions.js';
import { assertPrivateDirSync, ensurePrivateDir, readFileNoFollowSync, writeFileAtomic } from './fs-atomic.js';
import { MAX_OUTPUT_BYTES, run as defaultRun, type Run, type RunResult } from './exec.js';
import { sinceStart } from '../spans.js';
import type { Logger } from 'pino';
import { probeCheckProof, type CheckProof } from './check-proof.js';

export interface DelegateOptions {
  type: string;
  cniPath: string[];
  /** The environment the delegate inherits (libcni: the caller's, CNI_COMMAND overridden). */
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  log: Logger;
  /** Where to cache the VERSION probe (keyed by the binary's identity). */
  cacheDir?: string;
  run?: Run;
}

const ETXTBSY_RETRIES = 5;

/**
 * The delegate's file is still open for writing somewhere (an installer copying it in place): execve refuses it
 * with ETXTBSY for that moment. Run directly, that is spawn's errno; through `ip netns exec` (runInNetns) it is
 * that program's stderr.
 */
const textFileBusy = (r: RunResult): boolean => r.spawnError === 'ETXTBSY' || /text file busy/i.test(r.stderr);

/**
 * The delegate gave no answer of its own: it timed out (`timedOut`), or exited non-zero without a CNI error
 * object (a crash, a signal). STATUS tells this "could not tell" from a delegate that said it is not available.
 */
export class DelegateNoAnswer extends CniError {
  constructor(
    code: number,
    msg: string,
    opts: { details?: string },
    readonly timedOut: boolean,
  ) {
    super(code, msg, opts);
  }
}

/**
 * What the verbs, GC and the agent-IP code ask of the wrapped IPAM plugin: the narrow interface Delegate
 * implements and a scripted one (test/support/doubles/scripted-delegate.ts, the verbs' unit tests) stands in for.
 */
export interface IpamDelegate {
  readonly type: string;
  supportedVersions(): Promise<string[]>;
  /** The version to talk to it in for a config of version `wanted`. */
  versionFor(wanted: string): Promise<string>;
  speaks(version: string): Promise<boolean>;
  add(conf: Record<string, unknown>, resultVersion: string, env?: NodeJS.ProcessEnv): Promise<Result>;
  del(conf: Record<string, unknown>, env?: NodeJS.ProcessEnv): Promise<void>;
  check(conf: Record<string, unknown>, env?: NodeJS.ProcessEnv): Promise<void>;
  /**
   * Whether this delegate's CHECK proves anything at `version` (src/effects/check-proof.ts): learnt once per binary
   * by a CHECK of an attachment it never allocated. `confFor` builds its config with a prevResult; `netns` is an
   * existing namespace path for CNI_NETNS.
   */
  checkProof(confFor: (prevResult: Record<string, unknown>) => Record<string, unknown>, version: string, netns: string): Promise<CheckProof>;
  gc(conf: Record<string, unknown>): Promise<void>;
  status(conf: Record<string, unknown>): Promise<void>;
  /** The same delegate with every call bounded by `timeoutMs` instead (STATUS runs under its own bound). */
  withTimeout(timeoutMs: number): IpamDelegate;
}

export class Delegate implements IpamDelegate {
  private path: string | undefined;
  private supported: string[] | undefined;
  private readonly proofs = new Map<string, CheckProof>();
  constructor(private readonly o: DelegateOptions) {}

  get type(): string {
    return this.o.type;
  }

  withTimeout(timeoutMs: number): Delegate {
    return new Delegate({ ...this.o, timeoutMs });
  }

  /** The delegate's executable on CNI_PATH. Not found → code 7 (the config names a plugin that is not there). */
  async find(): Promise<string> {
    if (this.path) return this.path;
    for (const dir of this.o.cniPath) {
      const p = join(dir, this.o.type);
      try {
        // Synchronous: a few stat calls cost less than thread-pool round trips (fs-atomic.ts).
        accessSync(p, constants.X_OK);
        if (statSync(p).isFile()) return (this.path = p);
      } catch {
        // next directory
      }
    }
    throw new CniError(ErrorCode.InvalidNetworkConfig, `failed to find delegate plugin "${this.o.type}" in CNI_PATH`, {
      details: `searched: ${this.o.cniPath.join(':') || '(CNI_PATH empty)'}`,
    });
  }

  /** The binary's identity (path, size, mtime, inode) and where to cache what is learnt about it under `suffix`. */
  private async cacheFor(suffix: string): Promise<{ key: Record<string, unknown>; cacheDir?: string; cacheFile?: string }> {
    const path = await this.find();
    const st = statSync(path);
    const key = { path, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino };
    // Only under a state dir that is safe to write (not a symlink, ours, private); else probe every time.
    const cacheDir = this.o.cacheDir && safeDir(dirname(this.o.cacheDir)) ? this.o.cacheDir : undefined;
    return cacheDir ? { key, cacheDir, cacheFile: join(cacheDir, `${this.o.type}${suffix}.json`) } : { key };
  }

  /** The versions the delegate speaks, from its VERSION answer; cached per binary (path, size, mtime, inode). */
  async supportedVersions(): Promise<string[]> {
    if (this.supported) return this.supported;
    const { key, cacheDir, cacheFile } = await this.cacheFor('');
    const cached = cacheFile ? readCache(cacheFile) : undefined;
    if (cached && JSON.stringify(cached.key) === JSON.stringify(key) && Array.isArray(cached.versions)) return (this.supported = cached.versions);
    const out = await this.call('VERSION', { cniVersion: LATEST_VERSION }, { CNI_CONTAINERID: '', CNI_NETNS: '', CNI_IFNAME: '' });
    const versions = (out as { supportedVersions?: unknown } | undefined)?.supportedVersions;
    if (!Array.isArray(versions) || !versions.every((v) => typeof v === 'string')) {
      throw new CniError(ErrorCode.DelegateFailed, `delegate ${this.o.type} VERSION answered without supportedVersions`);
    }
    this.supported = versions as string[];
    // The cache directory may not exist yet (writeFileAtomic creates no directories): without it every call probed.
    // Not durable (fs-atomic.ts): a cache lost to a power loss is one more VERSION probe.
    if (cacheFile)
      await ensurePrivateDir(cacheDir!)
        .then(() => writeFileAtomic(cacheFile, JSON.stringify({ key, versions }), { durable: false }))
        .catch(() => undefined);
    return this.supported;
  }

  /** The version to speak to the delegate for a config at `wanted` (highest common, not newer). */
  async versionFor(wanted: string): Promise<string> {
    const v = bridgeVersion(wanted, await this.supportedVersions());
    if (!v) {
      throw new CniError(ErrorCode.IncompatibleVersion, `delegate ${this.o.type} speaks no version up to ${wanted}`, {
        details: `delegate supports ${(await this.supportedVersions()).join(', ')}`,
      });
    }
    return v;
  }

  async speaks(version: string): Promise<boolean> {
    return (await this.supportedVersions()).includes(version);
  }

  /** ADD: the delegate's result, converted to `resultVersion`. */
  async add(conf: Record<string, unknown>, resultVersion: string, env: NodeJS.ProcessEnv = {}): Promise<Result> {
    const out = await this.call('ADD', conf, env);
    const result = parseResult(out ?? {}, `delegate ${this.o.type} ADD result`);
    // At the boundary: the delegate's output excerpt is only at hand here.
    refuseBadAddresses(result, { delegate: this.o.type, output: () => excerpt(JSON.stringify(out)) });
    return convertResult(result, resultVersion);
  }

  async del(conf: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<void> {
    await this.call('DEL', conf, env);
  }

  async check(conf: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<void> {
    await this.call('CHECK', conf, env);
  }

  /** IpamDelegate.checkProof, cached beside the VERSION answer per binary and version (`<type>.check-<version>.json`). */
  async checkProof(confFor: (prevResult: Record<string, unknown>) => Record<string, unknown>, version: string, netns: string): Promise<CheckProof> {
    const known = this.proofs.get(version);
    if (known) return known;
    const { key, cacheDir, cacheFile } = await this.cacheFor(`.check-${version}`);
    const cached = cacheFile ? (readCache(cacheFile) as { key: unknown; proof?: unknown } | undefined) : undefined;
    if (cached && JSON.stringify(cached.key) === JSON.stringify(key) && (cached.proof === 'proves' || cached.proof === 'proves-nothing')) {
      this.proofs.set(version, cached.proof);
      return cached.proof;
    }
    const proof = await probeCheckProof(
      (c, env) => this.check(c, env),
      confFor,
      version,
      netns,
      (e) => e instanceof DelegateNoAnswer,
    );
    this.o.log.info({ delegate: this.o.type, version, checkProof: proof }, 'delegate CHECK probed');
    if (proof === 'unknown') return proof; // asked again next time
    this.proofs.set(version, proof);
    if (cacheFile && proof !== 'no-check')
      await ensurePrivateDir(cacheDir!)
        .then(() => writeFileAtomic(cacheFile, JSON.stringify({ key, proof }), { durable: false }))
        .catch(() => undefined);
    return proof;
  }

  async gc(conf: Record<string, unknown>): Promise<void> {
    await this.call('GC', conf, { CNI_CONTAINERID: '', CNI_NETNS: '', CNI_IFNAME: '', CNI_ARGS: '' });
  }

  async status(conf: Record<string, unknown>): Promise<void> {
    await this.call('STATUS', conf, { CNI_CONTAINERID: '', CNI_NETNS: '', CNI_IFNAME: '', CNI_ARGS: '' });
  }

  /** One invocation. Returns parsed stdout (undefined when empty); throws CniError on any failure. */
  async call(command: string, conf: Record<string, unknown>, envOverride: NodeJS.ProcessEnv = {}): Promise<unknown> {
    const path = await this.find();
    const run = this.o.run ?? defaultRun;
    const env = { ...this.o.env, ...envOverride, CNI_COMMAND: command };
    const input = JSON.stringify(conf);
    const started = sinceStart();
    let r = await run(path, [], { input, env, extendEnv: false, timeoutMs: this.o.timeoutMs, check: false });
    for (let i = 0; i < ETXTBSY_RETRIES && !r.timedOut && textFileBusy(r) && r.exitCode !== 0; i++) {
      await new Promise((res) => setTimeout(res, 50));
      r = await run(path, [], { input, env, extendEnv: false, timeoutMs: this.o.timeoutMs, check: false });
    }
    const ms = Math.round((sinceStart() - started) * 10) / 10;
    this.o.log.debug({ delegate: this.o.type, command, exitCode: r.exitCode, ms }, 'delegate call');
    if (r.timedOut) {
      throw new DelegateNoAnswer(
        ErrorCode.TryAgainLater,
        `delegate ${this.o.type} ${command} timed out after ${this.o.timeoutMs} ms`,
        { details: 'the delegate and its process group were killed; its output is no longer read' },
        true,
      );
    }
    if (r.notFound) throw new CniError(ErrorCode.InvalidNetworkConfig, `delegate ${this.o.type} could not be executed`, { details: path });
    // Whatever it printed before the cap (and however it exited, usually by the SIGKILL the cap sent) is cut off:
    // never read as an answer, nor as an error object.
    if (r.overflow) {
      throw new CniError(ErrorCode.DelegateFailed, `delegate ${this.o.type} ${command} printed more than ${MAX_OUTPUT_BYTES / 1024 / 1024} MiB`, {
        details: `its process group was killed and its output dropped; it begins: ${excerpt(r.stdout || r.stderr, 200)}`,
      });
    }
    if (r.exitCode !== 0) throw delegateError(this.o.type, command, r.stdout, r.stderr, r.exitCode);
    const text = r.stdout.trim();
    if (text === '') return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw new CniError(ErrorCode.DelegateFailed, `delegate ${this.o.type} ${command} printed output that is not JSON`, { details: excerpt(text) });
    }
  }
}

function safeDir(dir: string): boolean {
  try {
    assertPrivateDirSync(dir);
    return true;
  } catch {
    return false;
  }
}

/** The cached VERSION answer; anything unreadable is a miss. */
function readCache(file: string): { key: unknown; versions: string[] } | undefined {
  try {
    const text = readFileNoFollowSync(file);
    return text === undefined ? undefined : (JSON.parse(text) as { key: unknown; versions: string[] });
  } catch {
    return undefined;
  }
}

/** The delegate's own error object passes through unchanged; anything else is code 101 with its output. */
function delegateError(type: string, command: string, stdout: string, stderr: string, exitCode: number | undefined): CniError {
  for (const text of [stdout, stderr]) {
    const obj = tryJson(text.trim());
    if (obj && typeof obj.code === 'number' && typeof obj.msg === 'string') {
      return new CniError(obj.code, obj.msg, { details: typeof obj.details === 'string' ? obj.details : undefined });
    }
  }
  return new DelegateNoAnswer(
    ErrorCode.DelegateFailed,
    `delegate ${type} ${command} failed without a CNI error (exit ${exitCode ?? 'signal'})`,
    { details: excerpt(stderr || stdout) || '(no output)' },
    false,
  );
}

function tryJson(text: string): Record<string, unknown> | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function excerpt(text: string, max = 1000): string {
  const t = text.trim();
  return t.length > max ? `${t.slice(0, max)}…` : t;
}
