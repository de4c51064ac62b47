// Doctor's delegate check: the delegate is on the CNI path and speaks a version the shim can bridge to.
import { isSupported } from '../cni/versions.js';
import { Delegate } from '../effects/delegate.js';
import type { DoctorCheck } from '../fix/doctor-check.js';

export const delegateCheck: DoctorCheck = {
  name: 'delegate',
  async run(net) {
    const d = net.conf.settings.delegate;
    if (!d) return [{ check: this.name, verdict: 'skipped', summary: 'no delegate configured (see the conflist check)' }];
    // A fresh probe, no cache: "answering now" is the question.
    const probe = new Delegate({
      type: d.type,
      cniPath: net.cniPath,
      env: { CNI_PATH: net.cniPath.join(':') },
      timeoutMs: net.conf.settings.delegateTimeoutMs,
      log: net.log,
      run: net.run,
    });
    let path: string;
    try {
      path = await probe.find();
    } catch {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `delegate ${d.type} is not on the CNI path (${net.cniPath.join(':')})`,
          fix: `install ${d.type} into the CNI bin dir, or fix "delegate.type"`,
        },
      ];
    }
    let versions: string[];
    try {
      versions = await probe.supportedVersions();
    } catch (e) {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `delegate ${path} does not answer VERSION: ${(e as Error).message}`,
          fix: `run "CNI_COMMAND=VERSION ${path} </dev/null" by hand; reinstall ${d.type}`,
        },
      ];
    }
    const bridged = await probe.versionFor(net.conf.cniVersion).catch(() => undefined);
    if (!bridged) {
      return [
        {
          check: this.name,
          verdict: 'problem',
          summary: `delegate ${d.type} speaks ${versions.join(', ')}: nothing up to the conflist's ${net.conf.cniVersion}`,
          fix: `lower the conflist's cniVersion or upgrade ${d.type}`,
        },
      ];
    }
    const note = bridged === net.conf.cniVersion ? '' : `; the shim speaks ${bridged} to it`;
    return [{ check: this.name, verdict: 'ok', summary: `${path} answers VERSION (${versions.filter(isSupported).join(', ')})${note}` }];
  },
};
