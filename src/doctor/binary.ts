// Doctor's shim-binary check: the shim is on the CNI path and answers VERSION in the conflist's version.
import { PLUGIN_TYPE } from '../cni/config.js';
import { Delegate } from '../effects/delegate.js';
import { askVersion } from '../effects/shim-binary.js';
import type { DoctorCheck, Finding } from '../contract/doctor-check.js';
import type { Run } from '../effects/exec.js';
import { silentLogger, type Logger } from '../log.js';
import { LATEST_VERSION } from '../cni/versions.js';

const NAME = 'shim-binary';

export const binaryCheck: DoctorCheck = {
  name: NAME,
  run: (net) => shimBinaryFindings({ cniPath: net.cniPath, run: net.run, log: net.log }, net.conf.cniVersion),
  withoutNetwork: (node) => shimBinaryFindings({ cniPath: node.cniPath, run: node.run, log: silentLogger }, undefined),
};

/** The shim on the CNI path answering VERSION (in `cniVersion`, the conflist's, when there is one). */
async function shimBinaryFindings(net: { cniPath: string[]; run: Run; log: Logger }, cniVersion: string | undefined): Promise<Finding[]> {
  const path = await new Delegate({ type: PLUGIN_TYPE, cniPath: net.cniPath, env: {}, timeoutMs: 10_000, log: net.log, run: net.run })
    .find()
    .catch(() => undefined);
  if (!path) {
    // No shim network found: no list names the shim, so no ADD runs it (a node it was removed from, a cluster-pool
    // node): said, not a problem; the conflist check says whether it should be there.
    if (cniVersion === undefined)
      return [{ check: NAME, verdict: 'skipped', summary: `${PLUGIN_TYPE} is not on the CNI path (${net.cniPath.join(':')}), and no list names it` }];
    return [
      {
        check: NAME,
        verdict: 'problem',
        summary: `${PLUGIN_TYPE} is not on the CNI path (${net.cniPath.join(':')}): every pod ADD fails`,
        fix: "ipam-shim install --cni-bin-dir <the runtime's bin dir>",
      },
    ];
  }
  const { result: r, versions } = await askVersion(net.run, path, cniVersion ?? LATEST_VERSION);
  if (r.exitCode !== 0 || !versions) {
    return [
      {
        check: NAME,
        verdict: 'problem',
        summary: `${path} does not answer VERSION (exit ${r.exitCode ?? 'signal'}): ${(r.stderr || r.stdout).trim().slice(0, 200)}`,
        fix: 'reinstall: ipam-shim install (the copy may be truncated or built for another platform)',
      },
    ];
  }
  if (cniVersion !== undefined && !versions.includes(cniVersion)) {
    return [
      {
        check: NAME,
        verdict: 'problem',
        summary: `${path} speaks ${versions.join(', ')}, not the conflist's ${cniVersion}`,
        fix: 'install the current ipam-shim',
      },
    ];
  }
  return [{ check: NAME, verdict: 'ok', summary: `${path} answers VERSION (${versions.join(', ')})` }];
}
