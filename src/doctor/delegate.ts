// Doctor's delegate check: the delegate is on the CNI path and speaks a version the shim can bridge to, and which
// verbs it really implements: a CHECK for an attachment it never allocated that answers success proves nothing
// (src/effects/check-proof.ts), whatever the version says it speaks.
import { delegateConf } from '../cni/config.js';
import { atLeast, isSupported } from '../cni/versions.js';
import { Delegate } from '../effects/delegate.js';
import type { DoctorCheck } from '../contract/doctor-check.js';
import { checkVersionOf, type CheckProof } from '../effects/check-proof.js';

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
    // The shim's own CHECKs (agent-ip) go in the highest version both speak (src/effects/check-proof.ts).
    const checkVersion = checkVersionOf(versions) ?? bridged;
    const proof = await probe
      .checkProof((prevResult) => delegateConf(net.conf, checkVersion, { prevResult }), checkVersion, '/proc/self/ns/net')
      .catch(() => 'unknown' as const);
    return [
      { check: this.name, verdict: 'ok', summary: `${path} answers VERSION (${versions.filter(isSupported).join(', ')})${note}` },
      { check: this.name, verdict: 'ok', summary: `${d.type}: ${verbsSummary(bridged, checkVersion, proof)}` },
    ];
  },
};

/** Which verbs the delegate really implements at `version`, as far as the shim relies on them. */
function verbsSummary(version: string, checkVersion: string, proof: CheckProof): string {
  const check =
    proof === 'proves'
      ? 'CHECK can fail (it refused an attachment it never allocated): agent-ip confirms addresses with it'
      : proof === 'proves-nothing'
        ? 'CHECK proves nothing (answered success for an attachment it never allocated): agent-ip confirms addresses by a repeated ADD under their identity instead'
        : proof === 'no-check'
          ? `no CHECK (it speaks nothing from 0.4.0 on; asked at ${checkVersion}): agent-ip confirms addresses by a repeated ADD under their identity`
          : 'CHECK could not be probed (no answer of its own): agent-ip falls back to a repeated ADD';
  const gc = atLeast(version, '1.1.0') ? 'GC is forwarded to it by the GC verb' : `no GC at ${version}: the shim releases leaks with DELs`;
  return `ADD and DEL; ${check}; ${gc}`;
}
