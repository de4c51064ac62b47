import { chmod, readFile, realpath, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseShimSettings, PLUGIN_TYPE, type ShimSettings } from '../cni/config.js';
import { isObject } from '../cni/json.js';
import { validateFixes } from '../fix-list/address-steps.js';
import { CniError } from '../cni/errors.js';
import { allocatorOf, ANCHOR_TYPE, conflistFiles, readNetworkConfig } from '../conflist.js';
import { syncDir, writeFileAtomic } from '../effects/fs-atomic.js';
import { run as defaultRun, type Run } from '../effects/exec.js';
import { askPluginVersions } from '../effects/plugin-versions.js';
import { judgeListVersions, type ListVerdict } from '../cni/list-versions.js';
import { inspectConflist, upsertShimEntry, type ConflistShape, type UpsertAction } from './conflist-edit.js';

/**
 * The shim's keys checked as the plugin checks them: its config schema (unknown key → 2, bad value → 7), then
 * every fix's `validate` as ADD runs it first (7). A config that passes here is one ADD accepts.
 */
export function validateShimKeys(keys: Record<string, unknown>): ShimSettings {
  const settings = parseShimSettings(keys, '');
  validateFixes({ settings });
  return settings;
}

export interface ConflistOutcome {
  /** The file edited (or that would be), absent when none holds cilium-cni. */
  path?: string;
  /** `refused`: a plugin of the list does not take the version the runtime sends it; the file was not touched. */
  action: UpsertAction | 'missing' | 'refused';
  /** The list's version against its plugins' VERSION answers (when install was told where they are). */
  versions?: ListVerdict;
  entry?: Record<string, unknown>;
  /** Files skipped because they did not parse (cilium-agent may be writing one in place, or a typo), with why. */
  unreadable?: Unreadable[];
  /** Things that will make the entry useless or surprising, though it is in place. */
  warnings?: string[];
}

/** Where the list's plugins are, to ask them their VERSION before the entry goes in (the CNI bin dir). */
export interface VersionCheck {
  cniPath: string[];
  run?: Run;
}

/**
 * The target list against its plugins' VERSION answers, or undefined when not asked to look. A list a plugin
 * refuses is never written (every ADD would fail before the shim runs); a plugin that could not be asked (not
 * installed yet: cilium-agent copies cilium-cni in when it starts) does not stop install, and says so.
 */
async function judgeTarget(target: Target, check: VersionCheck | undefined): Promise<ListVerdict | undefined> {
  if (!check) return undefined;
  const plugins = target.shape.plugins.map((p) => p.value);
  return judgeListVersions(target.shape.list, await askPluginVersions(plugins, check.cniPath, check.run ?? defaultRun));
}

interface Unreadable {
  path: string;
  error: string;
}

interface Target {
  path: string;
  text: string;
  shape: ConflistShape;
}

/**
 * The first conflist (lexical order, as runtimes read them) that holds cilium-cni or the shim; `before` lists
 * the network configs that sort ahead of it (a runtime that uses only the first one never reads the target).
 */
async function findTargetConflist(
  confDir: string,
  anchorType = ANCHOR_TYPE,
): Promise<{ target?: Target; unreadable: Unreadable[]; before: string[] }> {
  const unreadable: Unreadable[] = [];
  const before: string[] = [];
  for (const path of await conflistFiles(confDir)) {
    let text: string;
    let shape: ConflistShape;
    try {
      const file = readNetworkConfig(path);
      if (file.single) {
        before.push(path); // a single-plugin config: nothing to chain into, but the runtime may use it
        continue;
      }
      text = file.text;
      shape = inspectConflist(text, anchorType);
    } catch (e) {
      unreadable.push({ path, error: e instanceof CniError && e.details ? e.details : (e as Error).message });
      continue;
    }
    if (shape.anchor >= 0 || shape.chained.length || shape.ipamSlot >= 0) return { target: { path, text, shape }, unreadable, before };
    before.push(path);
  }
  return { unreadable, before };
}

/** The keys of the chained shim entry already in the list (without `type`), or undefined when there is none. */
function existingKeys(shape: ConflistShape): Record<string, unknown> | undefined {
  const i = shape.chained[0];
  const value = i === undefined ? undefined : shape.plugins[i]!.value;
  if (!isObject(value)) return undefined;
  const { type: _type, ...keys } = value;
  return keys;
}

/** The plugin that allocates for the shim install puts right after the anchor (allocatorOf's rule); undefined without an anchor. */
const allocatorFor = (shape: ConflistShape): Record<string, unknown> | undefined =>
  allocatorOf(
    shape.plugins.map((p) => p.value),
    shape.anchor + 1,
  );

function warningsFor(target: Target, before: string[], entry: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (before.length) {
    out.push(
      `${before[0]} sorts before ${target.path}: runtimes (libcni) use the first network config, so the shim's entry is not used until that file is moved away`,
    );
  }
  const anchor = allocatorFor(target.shape);
  if (anchor && !isObject(anchor.ipam) && entry.delegate === undefined) {
    out.push(
      `${ANCHOR_TYPE} in ${target.path} has no "ipam": the shim's entry has no delegate, so GC, STATUS and agent IPs cannot reach the IPAM plugin (give "delegate" in --shim-config)`,
    );
  }
  return out;
}

/**
 * The chained entry: `type` first, then the operator's keys. Without a `delegate` the entry takes the IPAM
 * config cilium-cni uses, so GC, STATUS and agent IPs talk to the same IPAM plugin. Validated with the
 * schema the plugin uses (throws CniError 2/7).
 */
function buildEntry(shimKeys: Record<string, unknown>, shape: ConflistShape): Record<string, unknown> {
  const keys = { ...shimKeys };
  const anchor = allocatorFor(shape);
  if (keys.delegate === undefined && anchor && isObject(anchor.ipam) && typeof anchor.ipam.type === 'string' && anchor.ipam.type !== PLUGIN_TYPE) {
    keys.delegate = anchor.ipam;
  }
  validateShimKeys(keys);
  const { delegate, ...rest } = keys;
  return { type: PLUGIN_TYPE, ...(delegate === undefined ? {} : { delegate }), ...rest };
}

/**
 * Replaces `path` with `text` unless someone changed it since we read `before` (then false: read again). A
 * symlinked conflist stays a symlink: the new text replaces its target (atomically, in the target's directory),
 * as an operator who linked it there expects.
 */
export async function replaceIfUnchanged(link: string, before: string, text: string): Promise<boolean> {
  const path = await realpath(link);
  const st = await stat(path);
  if ((await readFile(path, 'utf8')) !== before) return false;
  const mode = st.mode & 0o777;
  // Durable (fs-atomic.ts): the runtime reads it after a reboot.
  await writeFileAtomic(path, text, { durable: true, mode });
  if (((await stat(path)).mode & 0o777) !== mode) await chmod(path, mode);
  if (dirname(path) !== dirname(link)) await syncDir(dirname(link));
  return true;
}

/**
 * The conflist install would write, without writing it: for Cilium's own route (`cni.customConf=true` with
 * `cni.configMap`: cilium-agent writes the operator's list itself, nothing edits it from outside). `text` is
 * absent when there is nothing to put the entry into (`missing`).
 */
export async function renderConflist(
  confDir: string,
  shimKeys: Record<string, unknown> | undefined,
  check?: VersionCheck,
): Promise<ConflistOutcome & { text?: string }> {
  const { target, unreadable, before } = await findTargetConflist(confDir);
  const extra = unreadable.length ? { unreadable } : {};
  if (!target) return { action: 'missing', ...extra };
  const versions = await judgeTarget(target, check);
  const judged = versions ? { versions } : {};
  if (target.shape.ipamSlot >= 0) return { path: target.path, action: 'ipam-slot', text: target.text, ...extra, ...judged };
  if (target.shape.anchor < 0) return { path: target.path, action: 'missing', ...extra };
  if (versions?.state === 'refused') return { path: target.path, action: 'refused', ...extra, ...judged };
  const entry = buildEntry(shimKeys ?? existingKeys(target.shape) ?? {}, target.shape);
  const r = upsertShimEntry(target.text, entry);
  const warnings = warningsFor(target, before, entry);
  return { path: target.path, action: r.action, entry, text: r.text, ...extra, ...judged, ...(warnings.length ? { warnings } : {}) };
}

/**
 * Inserts or updates the shim's entry after cilium-cni; `missing` when no conflist holds cilium-cni yet.
 * `shimKeys` undefined keeps the keys of the entry already there (a second run changes nothing).
 */
export async function installConflist(
  confDir: string,
  shimKeys: Record<string, unknown> | undefined,
  check?: VersionCheck,
): Promise<ConflistOutcome> {
  for (let attempt = 0; ; attempt++) {
    const { target, unreadable, before } = await findTargetConflist(confDir);
    const extra = unreadable.length ? { unreadable } : {};
    if (!target) return { action: 'missing', ...extra };
    const versions = await judgeTarget(target, check);
    const judged = versions ? { versions } : {};
    if (target.shape.ipamSlot >= 0) return { path: target.path, action: 'ipam-slot', ...extra, ...judged };
    if (target.shape.anchor < 0) {
      // Only a chained shim is left (cilium-cni gone from the list): nothing to anchor to.
      return { path: target.path, action: 'missing', ...extra };
    }
    const entry = buildEntry(shimKeys ?? existingKeys(target.shape) ?? {}, target.shape);
    const r = upsertShimEntry(target.text, entry);
    // Never into a list a plugin refuses: the file stays as it is (an entry already there is left, not removed:
    // taking it out would not make one ADD succeed). The caller names both versions and the one to use.
    if (versions?.state === 'refused' && r.changed) return { path: target.path, action: 'refused', ...extra, ...judged };
    const warnings = warningsFor(target, before, entry);
    if (!r.changed || (await replaceIfUnchanged(target.path, target.text, r.text))) {
      return { path: target.path, action: r.action, entry, ...extra, ...judged, ...(warnings.length ? { warnings } : {}) };
    }
    if (attempt >= 5) throw new Error(`${target.path} keeps changing while it is edited; try again`);
  }
}
