// PURE (the ledger's domain): the identity a delegate call for a recorded attachment must carry — the CNI_ARGS the
// runtime gave at ADD. A delegate keyed by the pod (azure-ipam over CNS: `K8S_POD_NAME:K8S_POD_NAMESPACE`) frees
// whatever a DEL's CNI_ARGS name, so a DEL that names no pod frees the key `:` — another attachment's addresses.
// Every DEL and CHECK the shim sends itself (GC, agent-ip, doctor) takes its CNI_ARGS from here
// (docs/failure-model.md#the-delegates-key).
import { parseCniArgs } from '../cni/env.js';
import type { LedgerRecord } from './record.js';
import { agentContainerID, agentIpOwner } from './owner.js';

/** CNI_ARGS keys of a pod's identity as a pod-keyed IPAM store reads them (CNS: name + namespace). */
const POD_NAME = 'K8S_POD_NAME';
const POD_NAMESPACE = 'K8S_POD_NAMESPACE';

/**
 * What a delegate call for a record carries, and how it was known:
 * - `recorded`: the record's own `cniArgs` (written by ADD or agent-ip since issue 47);
 * - `reconstructed`: an older shim's pod record: rebuilt from its `pod` as containerd sends them;
 * - `agent-ip-legacy`: an older shim's agent-ip record: that shim always sent CNI_ARGS='' for them, so '' is the
 *   identity it was allocated under (known, not missing);
 * - `unknown`: an older shim's record that names no pod and may be a pod's: no DEL is sent for it (GC withholds it).
 */
export type DelegateIdentity =
  | { kind: 'recorded' | 'reconstructed' | 'agent-ip-legacy'; cniArgs: string }
  | { kind: 'unknown'; why: string; fix: string };

/** The identity a DEL or CHECK of `record` must carry (see DelegateIdentity). */
export function identityOf(record: Pick<LedgerRecord, 'cniArgs' | 'pod' | 'owner' | 'containerID' | 'placement'>): DelegateIdentity {
  if (record.cniArgs !== undefined) return { kind: 'recorded', cniArgs: record.cniArgs };
  if (record.pod?.name && record.pod.namespace) return { kind: 'reconstructed', cniArgs: podCniArgs(record.containerID, record.pod) };
  if (record.placement === 'cli' && agentIpOwner(record.containerID) !== undefined) return { kind: 'agent-ip-legacy', cniArgs: '' };
  return {
    kind: 'unknown',
    why: 'written by an older ipam-shim, which kept no CNI_ARGS, and it names no pod: a DEL naming no pod would release whatever a pod-keyed IPAM (azure-ipam over CNS) holds under the empty key, not this attachment',
    fix: `release it by hand through the IPAM with the pod's CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME), or, once you know nothing holds its addresses, remove the record file (ipam-shim ledger shows it); a later ADD of one of its addresses takes it from a provably dead holder`,
  };
}

/** CNI_ARGS as containerd sends them for a pod (IgnoreUnknown, namespace, name, infra container ID, uid). */
function podCniArgs(containerID: string, pod: NonNullable<LedgerRecord['pod']>): string {
  return [
    'IgnoreUnknown=1',
    `${POD_NAMESPACE}=${pod.namespace}`,
    `${POD_NAME}=${pod.name}`,
    `K8S_POD_INFRA_CONTAINER_ID=${containerID}`,
    ...(pod.uid ? [`K8S_POD_UID=${pod.uid}`] : []),
  ].join(';');
}

/**
 * The pod a DEL with these CNI_ARGS names to a pod-keyed store (`namespace/name`), undefined when it names none.
 * Two attachments with one pod key are one allocation to CNS: releasing one releases the other's addresses.
 */
export function podKeyOf(cniArgs: string): string | undefined {
  let args: Record<string, string>;
  try {
    args = parseCniArgs(cniArgs);
  } catch {
    return undefined;
  }
  const name = args[POD_NAME] ?? '';
  const namespace = args[POD_NAMESPACE] ?? '';
  return name || namespace ? `${namespace}/${name}` : undefined;
}

/** The namespace of cilium-agent's own identities: where cilium-agent runs. */
const AGENT_POD_NAMESPACE = 'kube-system';

/**
 * The pod name under which `agent-ip --owner OWNER` allocates: `cilium-agent-OWNER.ipam-shim`. Unique per owner,
 * the same across restarts, and never a name a controller generates for a real pod: those end in `-<suffix>`
 * (ReplicaSet, DaemonSet, Job: five characters without vowels) or `-<ordinal>` (StatefulSet); this one ends in
 * `.ipam-shim`.
 */
const agentPodName = (owner: string): string => `${agentContainerID(owner)}.ipam-shim`;

/** The CNI_ARGS agent-ip sends for OWNER, shaped as containerd sends a pod's (docs/cli.md, agent-ip). */
export const agentIpCniArgs = (owner: string): string =>
  podCniArgs(agentContainerID(owner), { namespace: AGENT_POD_NAMESPACE, name: agentPodName(owner) });

/** The environment of a delegate call for `record` with identity `cniArgs` (no netns: the shim never enters one). */
export const delegateEnvFor = (record: Pick<LedgerRecord, 'containerID' | 'ifname'>, cniArgs: string, netns = ''): NodeJS.ProcessEnv => ({
  CNI_CONTAINERID: record.containerID,
  CNI_IFNAME: record.ifname,
  CNI_NETNS: netns,
  CNI_ARGS: cniArgs,
});
