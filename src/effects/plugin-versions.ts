// Asking the plugins of a list their CNI VERSION, as a runtime's libcni would find them (the first directory of the
// CNI path holding an executable file of that name). Each call is bounded (askVersion: 10 s, its process group
// killed at the deadline); nothing is cached: a node's cilium-cni changes with every Cilium upgrade.
import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import { PLUGIN_TYPE } from '../cni/config.js';
import { isObject } from '../cni/json.js';
import type { PluginAnswer } from '../cni/list-versions.js';
import { LATEST_VERSION } from '../cni/versions.js';
import type { Run } from './exec.js';
import { askVersion } from './shim-binary.js';

/** The first directory of `cniPath` holding an executable file `type`. */
export function findOnPath(type: string, cniPath: readonly string[]): string | undefined {
  for (const dir of cniPath) {
    const p = join(dir, type);
    try {
      accessSync(p, constants.X_OK);
      if (statSync(p).isFile()) return p;
    } catch {
      // next directory
    }
  }
  return undefined;
}

/** Every plugin of `plugins` but the shim, once per type, in list order: its VERSION answer, or why it could not be asked. */
export async function askPluginVersions(plugins: readonly unknown[], cniPath: readonly string[], run: Run): Promise<PluginAnswer[]> {
  const types = [
    ...new Set(
      plugins.map((p) => (isObject(p) && typeof p.type === 'string' ? p.type : undefined)).filter((t): t is string => !!t && t !== PLUGIN_TYPE),
    ),
  ];
  return Promise.all(
    types.map(async (type): Promise<PluginAnswer> => {
      // A plain name only: a type with a slash is not looked up on the CNI path by any runtime.
      const path = type.includes('/') ? undefined : findOnPath(type, cniPath);
      if (!path) return { type, why: `not in ${cniPath.join(':') || '(empty CNI path)'}` };
      const { result: r, versions } = await askVersion(run, path, LATEST_VERSION);
      if (r.timedOut) return { type, path, why: `${path} did not answer VERSION within its bound` };
      if (r.exitCode !== 0 || !versions || !versions.every((v) => typeof v === 'string'))
        return { type, path, why: `${path} answered VERSION with exit ${r.exitCode ?? 'signal'} and no supportedVersions` };
      return { type, path, versions: versions as string[] };
    }),
  );
}
