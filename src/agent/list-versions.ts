// Whether the plugins of the list the runtime uses take the version it sends them (src/cni/list-versions.ts's
// rule): what /readyz and ipam_shim_agent_list_version report. Installing, the watcher judges the list it chains
// into on every check (install/conflist.ts) and refuses to put the entry into one a plugin refuses; with installing
// disabled the agent asks after every pass, the list being Cilium's to write.
import { holdsShim } from '../cni/config.js';
import { judgeListVersions, type ListVerdict } from '../cni/list-versions.js';
import { ANCHOR_TYPE, readNetworkConfig, type EntryInUse } from '../conflist.js';
import type { Run } from '../effects/exec.js';
import { askPluginVersions } from '../effects/plugin-versions.js';
import { isObject } from '../cni/json.js';

/** The list at `entry.path` judged, or undefined when there is none, it does not parse, or it is no list of cilium-cni or the shim. */
export async function judgeRuntimeList(entry: EntryInUse, cniPath: readonly string[], run: Run): Promise<ListVerdict | undefined> {
  if (!entry.path) return undefined;
  let list: Record<string, unknown> & { plugins: unknown[] };
  try {
    list = readNetworkConfig(entry.path).list;
  } catch {
    return undefined; // the entry check says why (not-installed)
  }
  if (!list.plugins.some((p) => holdsShim(p) || (isObject(p) && p.type === ANCHOR_TYPE))) return undefined;
  return judgeListVersions(list, await askPluginVersions(list.plugins, cniPath, run));
}
