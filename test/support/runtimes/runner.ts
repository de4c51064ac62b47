// A CNI runtime for tests and the demo: drives a conflist against real plugin binaries the way libcni 1.2/1.3
// (containernetworking/cni, libcni/api.go + conf.go) does, including its result cache, prevResult handling,
// GC's DEL synthesis and STATUS. Behaviour mirrored, and where this deliberately differs, is listed in the
// comments marked "libcni:" and in README-style notes at the bottom of this header. The real libcni 1.3 (the
// cnitool harness, test/support/runtimes/cnitool.ts) checks it: test/integration/runner.test.ts runs the same calls through both.
//
// libcni behaviours mirrored (1.2.x/1.3.0, CNI spec 1.1.0):
// - Config version: the highest of `cniVersion` ∪ `cniVersions`, ignoring entries newer than what this runtime
//   implements (1.1.0). Without `cniVersions`, `cniVersion` is used as is (even if newer: the plugin rejects it).
// - Every plugin gets its own config with `name` and `cniVersion` of the list injected (overriding its own), plus
//   `prevResult` when there is one, plus `runtimeConfig` built from capabilityArgs filtered by the plugin's
//   `capabilities`. The JSON is re-serialised with sorted keys (Go marshals maps sorted).
// - Environment: the caller's environment plus CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_ARGS, CNI_IFNAME and
//   CNI_PATH, always all six ("" where unset: GC/STATUS send empty IDs; VERSION sends "dummy" netns/ifname/path).
// - ADD: validates container ID / network name / ifname (codes 3/4/7 like libcni's utils), runs plugins in order,
//   each later plugin getting the previous plugin's result as prevResult; writes the result cache
//   `<cacheDir>/results/<network>-<containerID>-<ifname>` ({kind "cniCacheV1", containerId, config (base64 of the
//   conflist bytes), ifName, networkName, netns, cniArgs, capabilityArgs, result}, dir 0700, file 0600).
// - CHECK: refused below 0.4.0 ("does not support the CHECK command"); `disableCheck` → no-op; prevResult = the
//   cached result converted to the list version (absent when there is no cache file); plugins in order.
// - DEL: for ≥ 0.4.0 prevResult = the cached result (an unreadable/unconvertible cache is deleted and DEL goes on
//   without prevResult); below 0.4.0 no prevResult at all, even when a cache file exists. Plugins in reverse order;
//   on success the cache file is removed (libcni PR #1095, "always delete the cache on conflist for CNI DEL");
//   on a plugin failure it is kept so the DEL can be retried.
// - GC: `disableGC` → no-op. Cached attachments of this network (any version) not in the valid list get a full
//   DEL with the cached netns, CNI args and capability args; then, only for list version ≥ 1.1.0, GC to every
//   plugin in order with empty CONTAINERID/NETNS/IFNAME/ARGS and stdin carrying `cni.dev/valid-attachments` and
//   `cni.dev/attachments` (both, as libcni ≥ 1.2.3 sends them). validAttachments undefined = upstream cnitool:
//   keys absent and every cached attachment is DELed. Errors do not stop GC; they are joined (GcError).
// - STATUS: no-op below 1.1.0; otherwise every plugin in order, stopping at the first error.
// - VERSION: stdin {"cniVersion": "1.1.0"}, CNI_NETNS/CNI_IFNAME/CNI_PATH "dummy", empty container ID.
// - Plugin errors: a non-zero exit with a CNI error object on stdout → PluginError with its code/msg/details;
//   no stdout → code 0 and msg `netplugin failed: "<stderr>"` (or "with no error message"); unparseable stdout →
//   code 0 and "netplugin failed but error parsing its diagnostic message". A result without `cniVersion` takes the
//   config's version (libcni's fixupResultVersion).
// - Results: decoded into the typed shape of their version and marshalled again (normalizeResult): unknown keys
//   dropped, empty optional fields omitted, `dns` omitted when empty at 1.x and always present at 0.x; cached
//   results converted between the 0.x and 1.x shapes (convertResult).
// Deliberate differences:
// - A list without any cniVersion is refused at construction (libcni would fail later, at DEL/CHECK).
// - Each plugin run has a timeout (default 60 s); libcni relies on the caller's context.
import { execa } from 'execa';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

export const RUNTIME_CNI_VERSION = '1.1.0';
export const DEFAULT_CACHE_DIR = '/var/lib/cni';

export type CniArgPairs = Array<[string, string]>;
export type JsonObject = Record<string, unknown>;

export interface Attachment {
  containerID: string;
  ifname: string;
}

export interface RuntimeOpts {
  /** CNI_ARGS, as `K=V;K2=V2` or as pairs. */
  args?: string | CniArgPairs;
  /** Capability arguments (libcni RuntimeConf.CapabilityArgs), injected into runtimeConfig by capability. */
  capabilityArgs?: JsonObject;
}

export interface CniRunnerOptions {
  /** The parsed conflist. */
  confList: JsonObject;
  /** The conflist's bytes as read from disk (what libcni caches); default JSON.stringify(confList). */
  confListBytes?: string | Buffer;
  /** CNI_PATH: directories searched for plugin binaries, in order. */
  pluginDirs: string[];
  /** libcni cache dir (results/ lives below it). Default /var/lib/cni. */
  cacheDir?: string;
  /** Extra environment for the plugins (on top of process.env, below the CNI_* variables). */
  env?: Record<string, string>;
  /** Per plugin invocation. Default 60 s. */
  timeoutMs?: number;
  /** Run every plugin inside this named netns (`ip netns exec`), as a runtime on that node would. Default: ours. */
  netns?: string;
}

/** One plugin execution, as it happened (kept in CniRunner.invocations, oldest first). */
export interface Invocation {
  plugin: string;
  pluginPath: string;
  command: string;
  env: {
    CNI_COMMAND: string;
    CNI_CONTAINERID: string;
    CNI_NETNS: string;
    CNI_IFNAME: string;
    CNI_ARGS: string;
    CNI_PATH: string;
  };
  stdin: JsonObject;
  stdout: string;
  stderr: string;
  exitCode: number | undefined;
  durationMs: number;
}

/** An error raised by the runtime itself (bad config, validation, missing plugin, CHECK not supported...). */
export class RunnerError extends Error {
  /** A CNI error code where libcni would produce one (validation), else undefined. */
  readonly code: number | undefined;
  constructor(message: string, code?: number, opts: { cause?: unknown } = {}) {
    super(message, opts);
    this.name = 'RunnerError';
    this.code = code;
  }
}

/** A plugin exited non-zero (or printed garbage). Carries the plugin's CNI error object, unchanged. */
export class PluginError extends Error {
  readonly plugin: string;
  readonly command: string;
  /** The CNI error code from the plugin's error object; 0 when it printed none (libcni's behaviour). */
  readonly code: number;
  readonly msg: string;
  readonly details: string | undefined;
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | undefined;
  readonly timedOut: boolean;
  constructor(p: {
    plugin: string;
    command: string;
    code: number;
    msg: string;
    details?: string;
    stdout: string;
    stderr: string;
    exitCode: number | undefined;
    timedOut?: boolean;
  }) {
    const verb = { ADD: 'add', DEL: 'delete', CHECK: 'check', GC: 'gc', STATUS: 'status', VERSION: 'version' }[p.command] ?? p.command;
    super(`plugin type="${p.plugin}" failed (${verb}): ${p.msg}${p.details ? `; ${p.details}` : ''}${p.code ? ` (code ${p.code})` : ''}`);
    this.name = 'PluginError';
    this.plugin = p.plugin;
    this.command = p.command;
    this.code = p.code;
    this.msg = p.msg;
    this.details = p.details;
    this.stdout = p.stdout;
    this.stderr = p.stderr;
    this.exitCode = p.exitCode;
    this.timedOut = p.timedOut ?? false;
  }
  /** The error object the plugin printed (or libcni's synthesised one). */
  toJSON(): JsonObject {
    const o: JsonObject = { code: this.code, msg: this.msg };
    if (this.details) o.details = this.details;
    return o;
  }
}

/** GC keeps going past errors; they are joined here (like libcni's errors.Join). */
export class GcError extends AggregateError {
  readonly deleted: Attachment[];
  constructor(errors: Error[], deleted: Attachment[]) {
    super(errors, errors.map((e) => e.message).join('\n'));
    this.name = 'GcError';
    this.deleted = deleted;
  }
}

export interface GcReport {
  /** Stale cached attachments that were DELed successfully. */
  deleted: Attachment[];
  /** Whether GC was sent to the plugins (list version ≥ 1.1.0). */
  gcSent: boolean;
  /** disableGC was set: nothing happened. */
  disabled: boolean;
}

/** A cached attachment as libcni stores it. */
export interface CacheEntry {
  kind: string;
  containerId: string;
  config: string;
  ifName: string;
  networkName: string;
  netns?: string;
  cniArgs?: CniArgPairs;
  capabilityArgs?: JsonObject;
  result?: JsonObject;
}

// ---------------------------------------------------------------------------------------------------------------
// versions

const SUPPORTED_RESULT_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

export function parseVersion(v: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  if (!m) throw new RunnerError(`invalid version "${v}": must be of the form X.Y.Z`, 1);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

export function compareVersions(a: string, b: string): number {
  const x = parseVersion(a);
  const y = parseVersion(b);
  for (let i = 0; i < 3; i++) if (x[i]! !== y[i]!) return x[i]! < y[i]! ? -1 : 1;
  return 0;
}

export const versionGte = (a: string, b: string): boolean => compareVersions(a, b) >= 0;

/** libcni NetworkConfFromBytes: highest of cniVersion ∪ cniVersions, skipping versions newer than the runtime. */
export function pickConfigVersion(confList: JsonObject, runtimeMax = RUNTIME_CNI_VERSION): string {
  let cniVersion = '';
  if ('cniVersion' in confList) {
    if (typeof confList.cniVersion !== 'string')
      throw new RunnerError(`error parsing configuration list: invalid cniVersion type ${typeof confList.cniVersion}`);
    cniVersion = confList.cniVersion;
  }
  if ('cniVersions' in confList) {
    const raw = confList.cniVersions;
    if (!Array.isArray(raw)) throw new RunnerError('error parsing configuration list: invalid type for cniVersions');
    const vs: string[] = [];
    raw.forEach((v, i) => {
      if (typeof v !== 'string') throw new RunnerError(`error parsing configuration list: invalid type for cniVersions index ${i}`);
      parseVersion(v);
      if (compareVersions(v, runtimeMax) <= 0) vs.push(v);
    });
    if (cniVersion !== '' && compareVersions(cniVersion, runtimeMax) <= 0) vs.push(cniVersion);
    vs.sort(compareVersions);
    if (vs.length > 0) cniVersion = vs[vs.length - 1]!;
  }
  return cniVersion;
}

/**
 * types.Result.GetAsVersion for the 0.3.0–1.1.0 shapes: libcni decodes every result into its typed Result
 * (types040 for 0.3.x/0.4.0, types100 for 1.x) and marshals that, so the output is normalizeResult's.
 * 1.x → 0.x: interfaces lose mtu/socketPath/pciID, ips gain `version` from their address; routes keep every field (types.Route is
 * shared). 0.x → 1.x: ips lose `version`.
 */
export function convertResult(result: JsonObject, toVersion: string): JsonObject {
  const from = typeof result.cniVersion === 'string' ? result.cniVersion : '';
  if (!SUPPORTED_RESULT_VERSIONS.includes(from)) throw new RunnerError(`unsupported result version "${from}"`, 1);
  if (!SUPPORTED_RESULT_VERSIONS.includes(toVersion)) throw new RunnerError(`cannot convert result to version "${toVersion}"`, 1);
  const out: JsonObject = { ...result, cniVersion: toVersion };
  if (versionGte(from, '1.0.0') && !versionGte(toVersion, '1.0.0') && Array.isArray(result.ips)) {
    out.ips = (result.ips as JsonObject[]).map((ip) => ({ ...ip, version: String(ip.address ?? '').includes(':') ? '6' : '4' }));
  }
  return normalizeResult(out);
}

/**
 * A result as libcni passes it on (prevResult, cache, the caller): decoded into the typed Result of its version
 * and marshalled again, in Go's field order. Unknown keys are dropped, empty optional fields omitted; 1.x drops
 * an empty `dns`, 0.x (types040, no custom marshaller) always has one, `{}` when empty. Addresses are kept as
 * written (Go would re-print them canonically).
 */
export function normalizeResult(result: JsonObject): JsonObject {
  const version = String(result.cniVersion);
  const v1 = versionGte(version, '1.0.0');
  const arr = (v: unknown): JsonObject[] => (Array.isArray(v) ? (v as JsonObject[]) : []);
  const out: JsonObject = { cniVersion: version };
  const interfaces = arr(result.interfaces).map((i) =>
    pick({ ...i, name: i.name ?? '' }, v1 ? ['name', 'mac', 'mtu', 'sandbox', 'socketPath', 'pciID'] : ['name', 'mac', 'sandbox']),
  );
  if (interfaces.length) out.interfaces = interfaces;
  // 0.x: `version` is not omitempty: a plugin's result without it is passed on with "" (only a conversion from
  // 1.x derives it from the address).
  const ips = arr(result.ips).map((ip) =>
    v1
      ? pick(ip, ['interface', 'address', 'gateway'])
      : { version: typeof ip.version === 'string' ? ip.version : '', ...pick(ip, ['interface', 'address', 'gateway']) },
  );
  if (ips.length) out.ips = ips;
  const routes = arr(result.routes).map((r) => pick(r, ['dst', 'gw', 'mtu', 'advmss', 'priority', 'table', 'scope']));
  if (routes.length) out.routes = routes;
  const dns = pick(result.dns && typeof result.dns === 'object' ? (result.dns as JsonObject) : {}, ['nameservers', 'domain', 'search', 'options']);
  if (!v1 || Object.keys(dns).length) out.dns = dns;
  return out;
}

/** The keys Go's `omitempty` keeps: set, and not "", 0, false or an empty array (pointers: `interface`, `table`, `scope` keep 0). */
function pick(o: JsonObject, keys: string[]): JsonObject {
  const pointers = ['interface', 'table', 'scope', 'name', 'address', 'dst', 'version'];
  const r: JsonObject = {};
  for (const k of keys) {
    const v = o[k];
    if (v === undefined || v === null) continue;
    if (!pointers.includes(k) && (v === '' || v === 0 || v === false || (Array.isArray(v) && v.length === 0))) continue;
    r[k] = v;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// validation (libcni pkg/utils)

const ID_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

function validateContainerID(id: string): void {
  if (id === '') throw new RunnerError('missing containerID', 3);
  if (!ID_RE.test(id)) throw new RunnerError(`invalid characters in containerID: ${id}`, 4);
}
function validateNetworkName(name: string): void {
  if (name === '') throw new RunnerError('missing network name', 7);
  if (!ID_RE.test(name)) throw new RunnerError(`invalid characters found in network name: ${name}`, 7);
}
function validateInterfaceName(ifname: string): void {
  if (ifname === '') throw new RunnerError('interface name is empty', 4);
  if (Buffer.byteLength(ifname) > 15) throw new RunnerError(`interface name is too long: ${ifname}`, 4);
  if (ifname === '.' || ifname === '..') throw new RunnerError(`interface name is . or ..: ${ifname}`, 4);
  if (/[/:\s]/.test(ifname)) throw new RunnerError(`interface name contains / or : or whitespace characters: ${ifname}`, 4);
}

/** cnitool's CNI_ARGS parser: `K=V;K2=V2`, every pair non-empty. */
export function parseCniArgs(s: string): CniArgPairs {
  return s.split(';').map((pair) => {
    const kv = pair.split('=');
    if (kv.length !== 2 || kv[0] === '' || kv[1] === '') throw new RunnerError(`invalid CNI_ARGS pair "${pair}"`);
    return [kv[0]!, kv[1]!] as [string, string];
  });
}

const stringifyArgs = (pairs: CniArgPairs | undefined): string => (pairs ?? []).map(([k, v]) => `${k}=${v}`).join(';');

/** Go's json.Marshal of map[string]interface{}: keys sorted at every level. */
function sortDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortDeep);
  if (v && typeof v === 'object') {
    const o = v as JsonObject;
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, sortDeep(o[k])]),
    );
  }
  return v;
}

/** libcni InjectConf: plugin config (sorted) + injected values (kept as they are), top-level keys sorted. */
function injectConf(plugin: JsonObject, inject: JsonObject): JsonObject {
  const merged: JsonObject = { ...(sortDeep(plugin) as JsonObject) };
  for (const [k, v] of Object.entries(inject)) {
    if (v === undefined || v === null) continue;
    merged[k] = v;
  }
  return Object.fromEntries(
    Object.keys(merged)
      .sort()
      .map((k) => [k, merged[k]]),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// config loading (libcni LoadConfList)

export interface LoadedConfList {
  file: string;
  bytes: Buffer;
  confList: JsonObject;
}

/**
 * libcni LoadConfList(dir, name): the first `*.conflist` (sorted by file name) whose `name` matches; failing that,
 * a single-plugin `*.conf`/`*.json` of that name, up-converted to a list.
 */
export async function loadConfList(dir: string, name: string): Promise<LoadedConfList> {
  let entries: string[];
  try {
    entries = (await readdir(dir, { withFileTypes: true })).filter((e) => !e.isDirectory()).map((e) => e.name);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') entries = [];
    else throw e;
  }
  entries.sort();
  const lists = entries.filter((f) => path.extname(f) === '.conflist');
  for (const f of lists) {
    const file = path.join(dir, f);
    const bytes = await readFile(file);
    const confList = parseJsonObject(bytes.toString('utf8'), file);
    if (confList.name === name) return { file, bytes, confList };
  }
  const singles = entries.filter((f) => ['.conf', '.json'].includes(path.extname(f)));
  if (singles.length === 0) {
    throw new RunnerError(lists.length ? `no net configuration with name "${name}" in ${dir}` : `no net configurations found in ${dir}`);
  }
  for (const f of singles) {
    const file = path.join(dir, f);
    const conf = parseJsonObject((await readFile(file)).toString('utf8'), file);
    if (conf.name === name) {
      const confList = { cniVersion: conf.cniVersion, name: conf.name, plugins: [conf] };
      return { file, bytes: Buffer.from(JSON.stringify(confList)), confList };
    }
  }
  throw new RunnerError(`no net configuration with name "${name}" in ${dir}`);
}

function parseJsonObject(text: string, what: string): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new RunnerError(`error parsing configuration ${what}: ${(e as Error).message}`, 6, { cause: e });
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new RunnerError(`error parsing configuration ${what}: not an object`, 6);
  return v as JsonObject;
}

// ---------------------------------------------------------------------------------------------------------------
// the runtime

interface RtConf {
  containerID: string;
  netns: string;
  ifname: string;
  args: CniArgPairs | undefined;
  capabilityArgs: JsonObject | undefined;
}

export class CniRunner {
  readonly name: string;
  /** The version the runtime speaks to every plugin of the list. */
  readonly cniVersion: string;
  readonly plugins: JsonObject[];
  readonly pluginDirs: string[];
  readonly cacheDir: string;
  readonly disableCheck: boolean;
  readonly disableGC: boolean;
  /** Every plugin execution, oldest first (tests inspect stdin/env here). */
  readonly invocations: Invocation[] = [];
  private readonly confBytes: Buffer;
  private readonly env: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly netns: string | undefined;

  constructor(opts: CniRunnerOptions) {
    const list = opts.confList;
    if (typeof list.name !== 'string') throw new RunnerError('error parsing configuration list: no name');
    this.name = list.name;
    this.cniVersion = pickConfigVersion(list);
    if (this.cniVersion === '') throw new RunnerError('configuration list has no cniVersion');
    parseVersion(this.cniVersion);
    if (!Array.isArray(list.plugins) || list.plugins.length === 0) throw new RunnerError('error parsing configuration list: no plugins in list');
    this.plugins = list.plugins.map((p, i) => {
      if (!p || typeof p !== 'object' || typeof (p as JsonObject).type !== 'string' || (p as JsonObject).type === '') {
        throw new RunnerError(`failed to parse plugin config ${i}: missing 'type'`);
      }
      return p as JsonObject;
    });
    this.disableCheck = readBool(list, 'disableCheck');
    this.disableGC = readBool(list, 'disableGC');
    this.confBytes = opts.confListBytes === undefined ? Buffer.from(JSON.stringify(list)) : Buffer.from(opts.confListBytes);
    this.pluginDirs = opts.pluginDirs;
    this.cacheDir = opts.cacheDir ?? DEFAULT_CACHE_DIR;
    this.env = opts.env ?? {};
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.netns = opts.netns;
  }

  /** `<cacheDir>/results/<network>-<containerID>-<ifname>` */
  cacheFilePath(containerID: string, ifname = 'eth0'): string {
    if (!containerID || !ifname) throw new RunnerError(`cache file path requires network name, container ID and interface name`);
    return path.join(this.cacheDir, 'results', `${this.name}-${containerID}-${ifname}`);
  }

  async add(containerID: string, netnsPath: string, ifname = 'eth0', args?: RuntimeOpts['args'] | RuntimeOpts): Promise<JsonObject> {
    const rt = this.rt(containerID, netnsPath, ifname, args);
    let result: JsonObject | undefined;
    for (const plugin of this.plugins) {
      validateContainerID(rt.containerID);
      validateNetworkName(this.name);
      validateInterfaceName(rt.ifname);
      const stdin = this.buildConfig(plugin, result, rt);
      const inv = await this.exec(plugin, 'ADD', stdin, rt);
      result = parseResult(inv, this.cniVersion);
    }
    await this.cacheAdd(result!, rt);
    return result!;
  }

  async check(containerID: string, netnsPath: string, ifname = 'eth0', args?: RuntimeOpts['args'] | RuntimeOpts): Promise<void> {
    if (!versionGte(this.cniVersion, '0.4.0')) throw new RunnerError(`configuration version "${this.cniVersion}" does not support the CHECK command`);
    if (this.disableCheck) return;
    const rt = this.rt(containerID, netnsPath, ifname, args);
    const cached = await this.getCachedResult(rt);
    for (const plugin of this.plugins) await this.exec(plugin, 'CHECK', this.buildConfig(plugin, cached, rt), rt);
  }

  async del(containerID: string, netnsPath: string, ifname = 'eth0', args?: RuntimeOpts['args'] | RuntimeOpts): Promise<void> {
    await this.delRt(this.rt(containerID, netnsPath, ifname, args));
  }

  private async delRt(rt: RtConf): Promise<void> {
    let cached: JsonObject | undefined;
    if (versionGte(this.cniVersion, '0.4.0')) {
      try {
        cached = await this.getCachedResult(rt);
      } catch {
        await this.cacheDel(rt);
        cached = undefined;
      }
    }
    for (let i = this.plugins.length - 1; i >= 0; i--) {
      const plugin = this.plugins[i]!;
      await this.exec(plugin, 'DEL', this.buildConfig(plugin, cached, rt), rt);
    }
    await this.cacheDel(rt);
  }

  /** libcni GCNetworkList. Throws GcError (with every failure) if anything failed; the rest still ran. */
  async gc(validAttachments?: Attachment[]): Promise<GcReport> {
    if (this.disableGC) return { deleted: [], gcSent: false, disabled: true };
    let cached: CacheEntry[];
    try {
      cached = await this.cachedAttachments();
    } catch {
      return { deleted: [], gcSent: false, disabled: false }; // libcni: a cache read error ends GC silently
    }
    const valid = validAttachments ? new Set(validAttachments.map((a) => `${a.containerID}\0${a.ifname}`)) : undefined;
    const errors: Error[] = [];
    const deleted: Attachment[] = [];
    for (const c of cached) {
      if (c.networkName !== this.name) continue;
      if (valid?.has(`${c.containerId}\0${c.ifName}`)) continue;
      const rt: RtConf = {
        containerID: c.containerId,
        netns: c.netns ?? '',
        ifname: c.ifName,
        args: c.cniArgs ?? undefined,
        capabilityArgs: c.capabilityArgs ?? undefined,
      };
      try {
        await this.delRt(rt);
        deleted.push({ containerID: c.containerId, ifname: c.ifName });
      } catch (e) {
        errors.push(wrap(`failed to delete stale attachment ${rt.containerID} ${rt.ifname}`, e));
      }
    }
    const gcSent = versionGte(this.cniVersion, '1.1.0');
    if (gcSent) {
      const inject: JsonObject = { name: this.name, cniVersion: this.cniVersion };
      if (validAttachments) {
        const list = validAttachments.map((a) => ({ containerID: a.containerID, ifname: a.ifname }));
        inject['cni.dev/valid-attachments'] = list;
        inject['cni.dev/attachments'] = list;
      }
      for (const plugin of this.plugins) {
        try {
          await this.exec(plugin, 'GC', injectConf(plugin, inject), emptyRt());
        } catch (e) {
          errors.push(wrap(`failed to GC plugin ${String(plugin.type)}`, e));
        }
      }
    }
    if (errors.length) throw new GcError(errors, deleted);
    return { deleted, gcSent, disabled: false };
  }

  /** libcni GetStatusNetworkList: no-op below 1.1.0; stops at (and throws) the first plugin error. */
  async status(): Promise<void> {
    if (!versionGte(this.cniVersion, '1.1.0')) return;
    for (const plugin of this.plugins) {
      await this.exec(plugin, 'STATUS', injectConf(plugin, { name: this.name, cniVersion: this.cniVersion }), emptyRt());
    }
  }

  /** invoke.GetVersionInfo for a plugin type found in pluginDirs. */
  async version(pluginType: string): Promise<{ cniVersion: string; supportedVersions: string[] }> {
    const inv = await this.exec(
      { type: pluginType },
      'VERSION',
      { cniVersion: RUNTIME_CNI_VERSION },
      { containerID: '', netns: 'dummy', ifname: 'dummy', args: undefined, capabilityArgs: undefined },
      'dummy',
    );
    const out = JSON.parse(inv.stdout) as { cniVersion?: string; supportedVersions?: string[] };
    return { cniVersion: out.cniVersion ?? '', supportedVersions: out.supportedVersions ?? ['0.1.0', '0.2.0'] };
  }

  /** libcni GetCachedAttachments(""): every valid cniCacheV1 entry (all networks), in file-name order. */
  async cachedAttachments(): Promise<CacheEntry[]> {
    const dir = path.join(this.cacheDir, 'results');
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    names.sort();
    const out: CacheEntry[] = [];
    for (const n of names) {
      let c: CacheEntry;
      try {
        c = JSON.parse(await readFile(path.join(dir, n), 'utf8')) as CacheEntry;
      } catch {
        continue;
      }
      if (c?.kind !== 'cniCacheV1' || !c.ifName || !c.networkName) continue;
      out.push(c);
    }
    return out;
  }

  /** The raw cache entry for an attachment, or undefined. */
  cacheEntry(containerID: string, ifname = 'eth0'): Promise<CacheEntry | undefined> {
    return readCacheEntry(this.cacheFilePath(containerID, ifname));
  }

  // -------------------------------------------------------------------------------------------------------------

  private rt(containerID: string, netns: string, ifname: string, a: RuntimeOpts['args'] | RuntimeOpts | undefined): RtConf {
    const o: RuntimeOpts = typeof a === 'string' || Array.isArray(a) ? { args: a } : (a ?? {});
    const args = typeof o.args === 'string' ? (o.args === '' ? undefined : parseCniArgs(o.args)) : o.args;
    return { containerID, netns, ifname, args, capabilityArgs: o.capabilityArgs };
  }

  private buildConfig(plugin: JsonObject, prevResult: JsonObject | undefined, rt: RtConf): JsonObject {
    const inject: JsonObject = { name: this.name, cniVersion: this.cniVersion };
    if (prevResult) inject.prevResult = prevResult;
    // libcni injectRuntimeConfig: capability args the plugin declared, replacing any runtimeConfig it had
    const caps = plugin.capabilities && typeof plugin.capabilities === 'object' ? (plugin.capabilities as JsonObject) : {};
    const rc: JsonObject = {};
    for (const [cap, on] of Object.entries(caps)) if (on === true && rt.capabilityArgs && cap in rt.capabilityArgs) rc[cap] = rt.capabilityArgs[cap];
    if (Object.keys(rc).length) inject.runtimeConfig = rc;
    return injectConf(plugin, inject);
  }

  private async getCachedResult(rt: RtConf): Promise<JsonObject | undefined> {
    let text: string;
    try {
      text = await readFile(this.cacheFilePath(rt.containerID, rt.ifname), 'utf8');
    } catch {
      return undefined; // libcni: read errors are ignored, the cache may not exist
    }
    let raw: JsonObject;
    try {
      const c = JSON.parse(text) as CacheEntry;
      raw = c.kind === 'cniCacheV1' ? (c.result ?? {}) : (c as unknown as JsonObject); // legacy cache = bare result
    } catch (e) {
      throw new RunnerError(`failed to parse cached result for network "${this.name}"`, undefined, { cause: e });
    }
    return convertResult(raw, this.cniVersion);
  }

  private async cacheAdd(result: JsonObject, rt: RtConf): Promise<void> {
    const entry: CacheEntry = {
      kind: 'cniCacheV1',
      containerId: rt.containerID,
      config: this.confBytes.toString('base64'),
      ifName: rt.ifname,
      networkName: this.name,
    };
    if (rt.netns) entry.netns = rt.netns;
    if (rt.args?.length) entry.cniArgs = rt.args;
    if (rt.capabilityArgs && Object.keys(rt.capabilityArgs).length) entry.capabilityArgs = rt.capabilityArgs;
    entry.result = result;
    const file = this.cacheFilePath(rt.containerID, rt.ifname);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await writeFile(file, JSON.stringify(entry), { mode: 0o600 });
  }

  private async cacheDel(rt: RtConf): Promise<void> {
    if (!rt.containerID || !rt.ifname) return;
    await rm(this.cacheFilePath(rt.containerID, rt.ifname), { force: true });
  }

  private async findInPath(type: string): Promise<string> {
    if (type.includes('/')) throw new RunnerError(`invalid plugin name: ${type}`);
    for (const dir of this.pluginDirs) {
      const full = path.join(dir, type);
      try {
        if ((await stat(full)).isFile()) return full;
      } catch {
        // next dir
      }
    }
    throw new RunnerError(`failed to find plugin "${type}" in path [${this.pluginDirs.join(' ')}]`);
  }

  private async exec(plugin: JsonObject, command: string, stdin: JsonObject, rt: RtConf, cniPath?: string): Promise<Invocation> {
    const type = String(plugin.type);
    const pluginPath = await this.findInPath(type);
    const env = {
      CNI_COMMAND: command,
      CNI_CONTAINERID: rt.containerID,
      CNI_NETNS: rt.netns,
      CNI_ARGS: stringifyArgs(rt.args),
      CNI_IFNAME: rt.ifname,
      CNI_PATH: cniPath ?? this.pluginDirs.join(':'),
    };
    const started = Date.now();
    const [file, argv] = this.netns ? ['ip', ['netns', 'exec', this.netns, pluginPath]] : [pluginPath, []];
    const r = await execa(file, argv, {
      input: JSON.stringify(stdin),
      env: { ...process.env, ...this.env, ...env },
      extendEnv: false,
      reject: false,
      timeout: this.timeoutMs,
      killSignal: 'SIGKILL',
      stripFinalNewline: false,
      encoding: 'utf8',
    });
    const inv: Invocation = {
      plugin: type,
      pluginPath,
      command,
      env,
      stdin,
      stdout: String(r.stdout ?? ''),
      stderr: String(r.stderr ?? ''),
      exitCode: r.exitCode,
      durationMs: Date.now() - started,
    };
    this.invocations.push(inv);
    if (r.failed || r.exitCode !== 0) throw pluginError(inv, r.timedOut, r.message ?? `exit status ${r.exitCode}`);
    return inv;
  }
}

/** A libcni cache file as written, or undefined when there is none. */
export async function readCacheEntry(file: string): Promise<CacheEntry | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as CacheEntry;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

function emptyRt(): RtConf {
  return { containerID: '', netns: '', ifname: '', args: undefined, capabilityArgs: undefined };
}

function readBool(list: JsonObject, key: string): boolean {
  const v = list[key];
  if (v === undefined) return false;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string' && ['true', 'false'].includes(v.toLowerCase())) return v.toLowerCase() === 'true';
  throw new RunnerError(`error parsing configuration list: invalid value ${JSON.stringify(v)} for ${key}`);
}

/** libcni invoke pluginErr. */
function pluginError(inv: Invocation, timedOut: boolean, execMessage: string): PluginError {
  const base = { plugin: inv.plugin, command: inv.command, stdout: inv.stdout, stderr: inv.stderr, exitCode: inv.exitCode, timedOut };
  if (inv.stdout.trim() === '') {
    const msg =
      inv.stderr === ''
        ? `netplugin failed with no error message: ${timedOut ? 'timed out' : execMessage.split('\n')[0]}`
        : `netplugin failed: ${JSON.stringify(inv.stderr)}`;
    return new PluginError({ ...base, code: 0, msg });
  }
  try {
    const o = JSON.parse(inv.stdout) as { code?: unknown; msg?: unknown; details?: unknown };
    return new PluginError({
      ...base,
      code: typeof o.code === 'number' ? o.code : 0,
      msg: typeof o.msg === 'string' ? o.msg : '',
      details: typeof o.details === 'string' && o.details !== '' ? o.details : undefined,
    });
  } catch (e) {
    return new PluginError({
      ...base,
      code: 0,
      msg: `netplugin failed but error parsing its diagnostic message ${JSON.stringify(inv.stdout)}: ${(e as Error).message}`,
    });
  }
}

/** invoke.ExecPluginWithResult: parse, default the version to the config's, accept known result versions. */
function parseResult(inv: Invocation, configVersion: string): JsonObject {
  let o: unknown;
  try {
    o = JSON.parse(inv.stdout);
  } catch (e) {
    throw new RunnerError(
      `plugin ${inv.plugin} (${inv.command}) printed an undecodable result: ${(e as Error).message}: ${JSON.stringify(inv.stdout.slice(0, 200))}`,
      6,
      { cause: e },
    );
  }
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new RunnerError(`plugin ${inv.plugin} (${inv.command}) printed a non-object result`, 6);
  const result = o as JsonObject;
  if (result.cniVersion === undefined || result.cniVersion === '') result.cniVersion = configVersion;
  if (!SUPPORTED_RESULT_VERSIONS.includes(String(result.cniVersion)))
    throw new RunnerError(`unsupported result version "${String(result.cniVersion)}" from ${inv.plugin}`, 1);
  return normalizeResult(result);
}

function wrap(prefix: string, e: unknown): Error {
  if (e instanceof PluginError || e instanceof RunnerError) {
    const w = new Error(`${prefix}: ${e.message}`, { cause: e });
    return w;
  }
  return new Error(`${prefix}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}
