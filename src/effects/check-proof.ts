// Whether a delegate's CHECK can fail, i.e. whether its success proves anything. Learnt by asking it to CHECK an
// attachment it never allocated: a random container ID, a pod name no pod has, addresses from the documentation
// ranges (RFC 5737, RFC 3849). host-local fails it (no allocation for that ID); azure-ipam answers success to every
// CHECK (its CmdCheck does nothing), so its CHECK proves nothing. Delegate caches the answer per binary.
import { CniError } from '../cni/errors.js';
import { atLeast, bridgeVersion, LATEST_VERSION } from '../cni/versions.js';
import { BITS, familyOf } from '../net/ip.js';

/**
 * `proves`: CHECK failed for the attachment it never allocated (its success means something); `proves-nothing`:
 * it answered success; `no-check`: the version spoken to it has no CHECK (below 0.4.0); `unknown`: it gave no
 * answer of its own (timed out, crashed): not cached, asked again next time.
 */
export type CheckProof = 'proves' | 'proves-nothing' | 'no-check' | 'unknown';

/**
 * The version to send the shim's own CHECKs in: the highest the delegate and the shim both speak. Not the
 * conflist's: a 0.3.1 list (AKS's) has no CHECK, but a delegate that speaks 0.4.0 or later can still be asked
 * (host-local 1.1.1 speaks 1.0.0). Undefined: nothing in common.
 */
export const checkVersionOf = (supported: readonly string[]): string | undefined => bridgeVersion(LATEST_VERSION, supported);

/** A prevResult for a delegate's CHECK from bare addresses (host prefixes: only the address matters). */
export function hostPrevResult(ips: readonly string[], version: string): Record<string, unknown> {
  const pre1 = !atLeast(version, '1.0.0');
  return {
    cniVersion: version,
    ips: ips.map((ip) => ({ address: `${ip}/${BITS[familyOf(ip)]}`, ...(pre1 ? { version: String(familyOf(ip)) } : {}) })),
  };
}

/** Documentation addresses (TEST-NET-1, 2001:db8::/32): no IPAM store holds them for a pod. */
const PROBE_IPS = ['192.0.2.1', '2001:db8::1'];

/**
 * Asks `check` (the delegate's CHECK at `version`) about an attachment nobody allocated. `confFor` builds the
 * delegate's config with a prevResult; `netns` is any existing namespace path (CHECK requires one; IPAM plugins
 * do not enter it).
 */
export async function probeCheckProof(
  check: (conf: Record<string, unknown>, env: NodeJS.ProcessEnv) => Promise<void>,
  confFor: (prevResult: Record<string, unknown>) => Record<string, unknown>,
  version: string,
  netns: string,
  /** The delegate gave no answer of its own (delegate.ts DelegateNoAnswer): "could not tell". */
  noAnswer: (e: unknown) => boolean,
): Promise<CheckProof> {
  if (!atLeast(version, '0.4.0')) return 'no-check';
  // Not node:crypto: a CNI call must not load it (.dependency-cruiser.cjs); the ID only has to be one nobody allocated.
  const nonce = `${process.pid.toString(16)}${Date.now().toString(16)}${Math.floor(Math.random() * 0xffffff).toString(16)}`;
  const containerID = `ipam-shim-check-probe-${nonce}`;
  try {
    await check(confFor(hostPrevResult(PROBE_IPS, version)), {
      CNI_CONTAINERID: containerID,
      CNI_IFNAME: 'eth0',
      CNI_NETNS: netns,
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=${containerID}.ipam-shim;K8S_POD_INFRA_CONTAINER_ID=${containerID}`,
    });
    return 'proves-nothing';
  } catch (e) {
    return e instanceof CniError && !noAnswer(e) ? 'proves' : 'unknown';
  }
}
