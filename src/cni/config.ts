// The network config on stdin: where the shim sits (chained or IPAM slot), its own keys (zod-validated,
// unknown keys → code 2, bad values → code 7), and the config the delegate gets.
import * as z from './zod.js';
import { CniError, ErrorCode, formatIssues } from './errors.js';
import { isSupported, SUPPORTED_VERSIONS } from './versions.js';
import { parseResult, type Result } from './result.js';
import { validContainerID } from './env.js';
import { isObject } from './json.js';

export const PLUGIN_TYPE = 'ipam-shim';

/** The log file's bound when the config does not set one (docs/configuration.md): ~16,000 calls' lines per file. */
export const DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024;
export const DEFAULT_LOG_BACKUPS = 3;

const PluginName = z.string().check(
  z.minLength(1, 'must not be empty'),
  z.refine((s: string) => !s.includes('/') && s !== '.' && s !== '..', 'must be a plain plugin name (no "/")'),
);

const absolutePath = () => z.string().check(z.startsWith('/', 'must be an absolute path'));

const DelegateSchema = z.looseObject({ type: PluginName });

/** residue.ebtablesBackends: `auto`, or a non-empty list of distinct backends (src/residue/backends.ts). */
export const EbtablesBackends = z.union([
  z.literal('auto'),
  z.array(z.enum(['nft', 'legacy', 'ebtables'])).check(
    z.minLength(1, 'must name at least one backend'),
    z.refine((a: string[]) => new Set(a).size === a.length, 'must not repeat a backend'),
  ),
]);

export const ShimSettingsSchema = z.strictObject({
  delegate: z.optional(DelegateSchema),
  /** Ledger root: never rename the default, upgrades depend on it. */
  stateDir: z._default(absolutePath(), '/var/lib/cni/ipam-shim'),
  logFile: z._default(absolutePath(), '/var/log/ipam-shim.log'),
  /** The log file is rotated before a line would take it past this size; `logBackups` rotated files are kept. */
  logMaxBytes: z._default(z.int().check(z.gte(4096), z.lte(1024 * 1024 * 1024)), DEFAULT_LOG_MAX_BYTES),
  logBackups: z._default(z.int().check(z.gte(0), z.lte(20)), DEFAULT_LOG_BACKUPS),
  logLevel: z._default(z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']), 'info'),
  metricsFile: z.optional(absolutePath()),
  delegateTimeoutMs: z._default(z.int().check(z.gte(100), z.lte(600_000)), 30_000),
  /** STATUS (docs/configuration.md "STATUS and node readiness"): the bound on the delegate's VERSION + STATUS, and how long a delegate that does not answer is tolerated. */
  statusTimeoutMs: z._default(z.int().check(z.gte(100), z.lte(4_000)), 1_000),
  statusGraceMs: z._default(z.int().check(z.gte(0), z.lte(300_000)), 15_000),
  residue: z._default(
    z.strictObject({
      ebtables: z._default(z.boolean(), true),
      neigh: z._default(z.boolean(), true),
      /** Which ebtables backends hold residue: `auto` (probe the node) or exactly these (docs/configuration.md). */
      ebtablesBackends: z._default(EbtablesBackends, 'auto'),
    }),
    { ebtables: true, neigh: true, ebtablesBackends: 'auto' },
  ),
  reservedCIDRs: z._default(z.array(z.string()).check(z.maxLength(10_000)), []),
  ipv6ProbeRewrite: z._default(z.enum(['auto', 'on', 'off']), 'auto'),
  probeSource: z.optional(z.string()),
  probeGlobal: z.optional(z.string()),
  uplink: z.optional(z.string().check(z.minLength(1), z.maxLength(15))),
  agentContainerIDs: z._default(z.array(z.string().check(z.minLength(1))), ['cilium-agent-*', 'cilium-ingress-*']),
});

export type ShimSettings = z.infer<typeof ShimSettingsSchema>;
export type Placement = 'chained' | 'ipam';

/** Keys the runtime or spec may put into a plugin's config next to ours (chained placement). */
const STANDARD_KEYS = new Set([
  'cniVersion',
  'cniVersions',
  'name',
  'type',
  'args',
  'ipMasq',
  'ipam',
  'dns',
  'capabilities',
  'runtimeConfig',
  'prevResult',
  'cni.dev/valid-attachments',
  'cni.dev/attachments',
  'disableCheck',
  'disableGC',
]);

export interface Attachment {
  containerID: string;
  ifname: string;
}

/** How an attachment is named to people (logs, errors, doctor): `<containerID>/<ifname>`. */
export const attachmentName = (a: Attachment): string => `${a.containerID}/${a.ifname}`;

export interface NetConf {
  raw: Record<string, unknown>;
  cniVersion: string;
  name: string;
  placement: Placement;
  settings: ShimSettings;
  prevResult: Result | undefined;
  /**
   * GC: the runtime's valid list as it came: undefined when the key is absent, null when it is null. GC reads both as
   * an empty list, as every typed Go plugin does (issue 36): libcni sends null for CRI-O's nil slice (no pod left).
   */
  validAttachments: Attachment[] | null | undefined;
  /** DEL only (parseNetConfForDel): the config's mistake, read around; `settings` holds defaults for `unreadable`. */
  mistake?: ConfigMistake;
}

interface ConfigMistake {
  /** What parseNetConf refused the config with (what ADD, CHECK and STATUS answer). */
  error: CniError;
  /** Our settings whose value could not be used (an unknown key is not listed: it only adds nothing). */
  unreadable: string[];
}

function requireVersion(raw: Record<string, unknown>): string {
  const v = raw.cniVersion;
  // A config without cniVersion means 0.1.0 to the Go skel: unsupported here.
  if (typeof v !== 'string' || !isSupported(v)) {
    throw new CniError(ErrorCode.IncompatibleVersion, `incompatible CNI versions: config is ${JSON.stringify(v ?? '0.1.0')}`, {
      details: `plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    });
  }
  return v;
}

/** The network name is a directory name (the ledger's `<stateDir>/<name>`, host-local's `<dataDir>/<name>`): NAME_MAX. */
const MAX_NAME_BYTES = 255;

function requireName(raw: Record<string, unknown>): string {
  const name = raw.name;
  if (typeof name !== 'string' || name === '') throw new CniError(ErrorCode.InvalidNetworkConfig, 'missing network name');
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, `network name too long (${Buffer.byteLength(name)} bytes)`, {
      details: `at most ${MAX_NAME_BYTES} bytes: it names the ledger directory <stateDir>/<name>`,
    });
  }
  if (validContainerID(name))
    throw new CniError(ErrorCode.InvalidNetworkConfig, `invalid network name ${JSON.stringify(name)}`, {
      details: 'must match [a-zA-Z0-9][a-zA-Z0-9_.-]*',
    });
  return name;
}

/**
 * THE rule for whether a plugin entry (or a stdin config) holds the shim, and where: `chained` (its `type`, which
 * wins), `ipam` (its `ipam.type`), or undefined. The plugin (parseNetConf), the conf dir's reader (src/conflist.ts)
 * and install's conflist surgery (src/install/conflist-edit.ts) all ask here.
 */
export function shimPlacement(entry: unknown): Placement | undefined {
  if (!isObject(entry)) return undefined;
  if (entry.type === PLUGIN_TYPE) return 'chained';
  return isObject(entry.ipam) && entry.ipam.type === PLUGIN_TYPE ? 'ipam' : undefined;
}

/** Whether a plugin entry holds the shim, chained or in its IPAM slot (shimPlacement). */
export const holdsShim = (entry: unknown): boolean => shimPlacement(entry) !== undefined;

function detectPlacement(raw: Record<string, unknown>): Placement {
  const placement = shimPlacement(raw);
  if (placement) return placement;
  throw new CniError(ErrorCode.InvalidNetworkConfig, `neither "type" nor "ipam.type" is "${PLUGIN_TYPE}"`);
}

/** Our keys: the whole `ipam` object in the IPAM slot, the non-standard top-level keys when chained. */
function ownKeys(raw: Record<string, unknown>, placement: Placement): Record<string, unknown> {
  if (placement === 'ipam') {
    const { type: _type, ...rest } = raw.ipam as Record<string, unknown>;
    return rest;
  }
  return Object.fromEntries(Object.entries(raw).filter(([k]) => !STANDARD_KEYS.has(k)));
}

export function parseShimSettings(keys: Record<string, unknown>, where: string): ShimSettings {
  const r = ShimSettingsSchema.safeParse(keys);
  if (r.success) return r.data;
  const unknown = r.error.issues.find((i) => i.code === 'unrecognized_keys');
  if (unknown && 'keys' in unknown) {
    const key = (unknown.keys as string[])[0]!;
    const at = [where, ...unknown.path.map(String), key].filter(Boolean).join('.');
    throw new CniError(ErrorCode.UnsupportedField, `unsupported field "${at}" in network config`, {
      details: `value ${JSON.stringify((keys as Record<string, unknown>)[key])?.slice(0, 200)}; allowed: ${Object.keys(ShimSettingsSchema.shape).join(', ')}`,
    });
  }
  const issues = r.error.issues.map((i) => ({ ...i, path: [where, ...i.path].filter((p) => p !== '') as PropertyKey[] }));
  throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid network config', { details: formatIssues(issues) });
}

const AttachmentListSchema = z.array(z.looseObject({ containerID: z.string(), ifname: z.string() }));

/** The valid list (the legacy key when the current one holds none); null when a key is null, undefined when both are absent. */
function readValidAttachments(raw: Record<string, unknown>): Attachment[] | null | undefined {
  const list = raw['cni.dev/valid-attachments'] ?? raw['cni.dev/attachments'];
  if (list === undefined || list === null) return raw['cni.dev/valid-attachments'] === null || raw['cni.dev/attachments'] === null ? null : undefined;
  const r = AttachmentListSchema.safeParse(list);
  if (!r.success) throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid cni.dev/valid-attachments', { details: formatIssues(r.error.issues) });
  return r.data.map(({ containerID, ifname }) => ({ containerID, ifname }));
}

/** Parses and validates the whole stdin config for a non-VERSION verb. */
export function parseNetConf(raw: Record<string, unknown>): NetConf {
  const cniVersion = requireVersion(raw);
  const name = requireName(raw);
  const placement = detectPlacement(raw);
  const settings = parseShimSettings(ownKeys(raw, placement), placement === 'ipam' ? 'ipam' : '');
  if (placement === 'ipam' && !settings.delegate) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'missing "ipam.delegate": the IPAM slot needs the IPAM config to wrap');
  }
  const prevResult = raw.prevResult === undefined ? undefined : parseResult(raw.prevResult, 'prevResult');
  return { raw, cniVersion, name, placement, settings, prevResult, validAttachments: readValidAttachments(raw) };
}

/**
 * DEL's reading: a config mistake must not block teardown (libcni stops a DEL chain at the first failure, so the
 * main plugin's DEL would never run). When parseNetConf refuses the config, every setting that is valid on its
 * own is kept, the others fall back to their defaults and are listed in `mistake.unreadable`; prevResult and the
 * valid list (DEL needs neither) are dropped. The version, the network name and the placement are still
 * required: without them DEL cannot tell which ledger or attachment is meant, and fails as before.
 */
export function parseNetConfForDel(raw: Record<string, unknown>): NetConf {
  try {
    return parseNetConf(raw);
  } catch (e) {
    if (!(e instanceof CniError)) throw e;
    const cniVersion = requireVersion(raw);
    const name = requireName(raw);
    const placement = detectPlacement(raw);
    const keys = ownKeys(raw, placement);
    const unreadable: string[] = [];
    const settings: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(ShimSettingsSchema.shape)) {
      const r = schema.safeParse(keys[key]);
      if (r.success) settings[key] = r.data;
      else {
        unreadable.push(key);
        settings[key] = schema.safeParse(undefined).data;
      }
    }
    return {
      raw,
      cniVersion,
      name,
      placement,
      settings: settings as ShimSettings,
      prevResult: undefined,
      validAttachments: undefined,
      mistake: { error: e, unreadable },
    };
  }
}

/**
 * The config the delegate gets: ours with `ipam` replaced by `delegate`, our own keys removed, at `version`
 * (prevResult converted by the caller). Chained: the shim's own entry becomes an IPAM-only config.
 */
export function delegateConf(conf: NetConf, version: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const base = conf.placement === 'ipam' ? { ...conf.raw } : Object.fromEntries(Object.entries(conf.raw).filter(([k]) => STANDARD_KEYS.has(k)));
  delete base.prevResult;
  delete base['cni.dev/valid-attachments'];
  delete base['cni.dev/attachments'];
  delete base.cniVersions;
  return { ...base, cniVersion: version, ipam: conf.settings.delegate, ...extra };
}
