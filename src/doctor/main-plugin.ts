// Doctor's main-plugin check: the plugins the shim's conflist runs around it (cilium-cni, or whatever is listed
// before the shim, or the plugin whose IPAM slot it sits in) are on the CNI path and take the version the runtime
// sends them. A runtime that cannot find one, or one that refuses the list's version (cilium-cni 1.17 and older stop
// at 1.0.0: "incompatible CNI versions"), fails every pod's ADD before the shim is even called. Without a shim
// conflist it looks at the conflist the shim would be chained into, the one holding cilium-cni, and at no other
// network's.
import { PLUGIN_TYPE } from '../cni/config.js';
import { judgeListVersions } from '../cni/list-versions.js';
import { ANCHOR_TYPE } from '../conflist.js';
import type { Run } from '../effects/exec.js';
import { askPluginVersions, findOnPath } from '../effects/plugin-versions.js';
import type { DoctorCheck, Finding } from '../contract/doctor-check.js';
import { typeOf } from './ipam-config.js';
import { ciliumConfig, scanConfDir } from './conf-dir.js';

const NAME = 'main-plugin';

/** One finding per plugin of the list other than the shim: where it was found, or that it is missing. */
async function pluginFindings(path: string, list: Record<string, unknown>, cniPath: readonly string[], run: Run): Promise<Finding[]> {
  const plugins = list.plugins as unknown[];
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
  const onPathFindings = types.map((type): Finding => {
    const found = findOnPath(type, cniPath);
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
  return [...onPathFindings, ...(await versionFindings(path, list, cniPath, run))];
}

/**
 * The list's version against what its plugins answer to VERSION (asked now, bounded, never cached). A refusal is a
 * problem (every ADD fails); a plugin that answered nothing usable is a warning ("could not look" is not "fine");
 * one not on the path has its own problem above.
 */
async function versionFindings(path: string, list: Record<string, unknown>, cniPath: readonly string[], run: Run): Promise<Finding[]> {
  const answers = await askPluginVersions(list.plugins as unknown[], cniPath, run);
  const v = judgeListVersions(list, answers);
  const data = { written: v.written, picked: v.picked, use: v.use, refused: v.refused, notAsked: v.notAsked };
  if (v.state === 'refused')
    return [
      {
        check: NAME,
        verdict: 'problem',
        summary: `${path}: ${v.message}`,
        fix: v.use
          ? `write the list at ${v.use} where it is made (Cilium's cni.configMap, CNS on AKS), or run a Cilium whose cilium-cni takes ${v.picked ?? v.written}; ipam-shim install refuses to chain into it until then`
          : 'no version is taken by every plugin of the list: replace the plugin that refuses',
        data,
      },
    ];
  const answered = answers.filter((a) => a.path);
  const unanswered = v.notAsked.filter((n) => answered.some((a) => a.type === n.type));
  if (unanswered.length)
    return [
      {
        check: NAME,
        verdict: 'warn',
        summary: `${path}: ${v.message}`,
        fix: `run "CNI_COMMAND=VERSION <plugin> </dev/null" by hand; reinstall the plugin that does not answer`,
        data,
      },
    ];
  if (v.state === 'taken') return [{ check: NAME, verdict: 'ok', summary: `${path}: ${v.message}`, data }];
  return [];
}

export const mainPluginCheck: DoctorCheck = {
  name: NAME,
  async run(net) {
    return pluginFindings(net.shim.path, net.shim.list, net.cniPath, net.run);
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
    return pluginFindings(cilium.path, cilium.list, node.cniPath, node.run);
  },
};
