// Doctor's main-plugin check: the plugins the shim's conflist runs around it (cilium-cni, or whatever is listed
// before the shim, or the plugin whose IPAM slot it sits in) are on the CNI path. A runtime that cannot find one
// fails every pod's ADD before the shim is even called. Without a shim conflist it looks at the conflist the
// shim would be chained into, the one holding cilium-cni, and at no other network's.
import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import { PLUGIN_TYPE } from '../cni/config.js';
import { ANCHOR_TYPE } from '../conflist.js';
import type { DoctorCheck, Finding } from '../fix/doctor-check.js';
import { typeOf } from './ipam-config.js';
import { ciliumConfig, scanConfDir } from './conf-dir.js';

const NAME = 'main-plugin';

/** The first directory of the CNI path holding an executable file `type`. */
function onPath(type: string, cniPath: readonly string[]): string | undefined {
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

/** One finding per plugin of the list other than the shim: where it was found, or that it is missing. */
function pluginFindings(path: string, plugins: unknown[], cniPath: readonly string[]): Finding[] {
  const types = plugins.map((p) => typeOf(p)).filter((t): t is string => t !== undefined && t !== PLUGIN_TYPE);
  if (!types.length)
    return [
      {
        check: NAME,
        verdict: 'warn',
        summary: `${path} lists no plugin besides ipam-shim: nothing sets up the pod's interface`,
        fix: 'chain the shim after cilium-cni (ipam-shim install)',
      },
    ];
  return types.map((type): Finding => {
    const found = onPath(type, cniPath);
    if (found) return { check: NAME, verdict: 'ok', summary: `${type} (${path}) is on the CNI path: ${found}` };
    return {
      check: NAME,
      verdict: 'problem',
      summary: `${type}, listed in ${path}, is not on the CNI path (${cniPath.join(':') || 'empty'}): every pod ADD of that network fails`,
      fix:
        type === ANCHOR_TYPE
          ? "install Cilium (cilium-agent copies cilium-cni into the runtime's bin dir), or pass the runtime's bin dir as --cni-path"
          : `install ${type} into the runtime's bin dir, or pass that dir as --cni-path`,
    };
  });
}

export const mainPluginCheck: DoctorCheck = {
  name: NAME,
  async run(net) {
    return pluginFindings(net.shim.path, net.shim.list.plugins as unknown[], net.cniPath);
  },
  /** Without a shim conflist: only cilium's, the one the shim is chained into (other networks are not the shim's to judge). */
  async withoutNetwork(node) {
    const cilium = ciliumConfig(await scanConfDir(node.confDir));
    if (!cilium)
      return [
        {
          check: NAME,
          verdict: 'skipped',
          summary: `no cilium-cni conflist in ${node.confDir}: no main plugin to look for (see the conflist check)`,
        },
      ];
    return pluginFindings(cilium.path, cilium.list.plugins, node.cniPath);
  },
};
