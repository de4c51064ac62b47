// Doctor's shim-binary check: the shim is on the CNI path and answers VERSION in the conflist's version.
import { PLUGIN_TYPE } from '../cni/config.js';
import { Delegate } from '../effects/delegate.js';
import type { DoctorCheck } from './check.js';

export const binaryCheck: DoctorCheck = {
  name: 'shim-binary',
  async run(net) {
    const path = await new Delegate({ type: PLUGIN_TYPE, cniPath: net.cniPath, env: {}, timeoutMs: 10_000, log: net.log, run: net.run })
      .find()
      .catch(() => undefined);
    if (!path) {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `${PLUGIN_TYPE} is not on the CNI path (${net.cniPath.join(':')}): every pod ADD fails`,
          fix: "ipam-shim install --cni-bin-dir <the runtime's bin dir>",
        },
      ];
    }
    const r = await net.run(path, [], {
      input: JSON.stringify({ cniVersion: net.conf.cniVersion }),
      env: { CNI_COMMAND: 'VERSION', CNI_CONTAINERID: '', CNI_NETNS: 'dummy', CNI_IFNAME: 'dummy', CNI_PATH: 'dummy' },
      timeoutMs: 10_000,
      check: false,
    });
    let versions: unknown;
    try {
      versions = (JSON.parse(r.stdout) as { supportedVersions?: unknown }).supportedVersions;
    } catch {
      versions = undefined;
    }
    if (r.exitCode !== 0 || !Array.isArray(versions)) {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `${path} does not answer VERSION (exit ${r.exitCode ?? 'signal'}): ${(r.stderr || r.stdout).trim().slice(0, 200)}`,
          fix: 'reinstall: ipam-shim install (the copy may be truncated or built for another platform)',
        },
      ];
    }
    if (!versions.includes(net.conf.cniVersion)) {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `${path} speaks ${versions.join(', ')}, not the conflist's ${net.conf.cniVersion}`,
          fix: 'install the current ipam-shim',
        },
      ];
    }
    return [{ check: this.name, verdict: 'ok', summary: `${path} answers VERSION (${versions.join(', ')})` }];
  },
};
