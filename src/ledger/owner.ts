// PURE (the ledger's domain): who an attachment belongs to, by its container ID — the one rule for cilium-agent's own attachments.
// Two kinds reach the ledger as owner `agent`: the ones `ipam-shim agent-ip` allocates (`cilium-agent-<owner>`,
// design-cfps #13), which agent-ip can re-allocate and release, and the ones cilium-agent allocates itself through
// the IPAM plugin (CFP-45607's `cilium-ingress-<node>`, any other agentContainerIDs pattern), which only
// cilium-agent can. ADD, the metrics, doctor and `agent-ip list` all ask here, so none names a fix the other
// cannot carry out.

/** The container-ID prefix of the attachments `ipam-shim agent-ip` makes; `agent-ip --owner NAME` ↔ `cilium-agent-NAME`. */
const AGENT_IP_PREFIX = 'cilium-agent-';

/** What agent-ip accepts as an owner name (a DNS-label-like word). */
export const AGENT_OWNER = /^[a-z0-9]([a-z0-9.-]{0,40}[a-z0-9])?$/;

/** The container ID `ipam-shim agent-ip --owner owner` allocates under. */
export const agentContainerID = (owner: string): string => `${AGENT_IP_PREFIX}${owner}`;

/**
 * The agent-ip owner whose container ID this is, or undefined when `ipam-shim agent-ip` does not manage it (a
 * pod, or an attachment cilium-agent allocated itself, e.g. `cilium-ingress-<node>`).
 */
export function agentIpOwner(containerID: string): string | undefined {
  if (!containerID.startsWith(AGENT_IP_PREFIX)) return undefined;
  const owner = containerID.slice(AGENT_IP_PREFIX.length);
  return AGENT_OWNER.test(owner) ? owner : undefined;
}

/** Whose attachment a container ID is: cilium-agent's (it matches one of agentContainerIDs; GC keeps it) or a pod's. */
export const ownerOf = (containerID: string, agentPatterns: readonly string[]): 'agent' | 'pod' =>
  agentPatterns.some((p) => globRe(p).test(containerID)) ? 'agent' : 'pod';

/** agentContainerIDs' glob: `*` matches anything, every other character itself. */
const globRe = (p: string): RegExp => new RegExp(`^${p.split('*').map(escapeRe).join('.*')}$`);
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** How to give an agent attachment a new address (its current one must go): agent-ip's release + allocate, or cilium-agent. */
export function agentReplaceFix(containerID: string): string {
  const owner = agentIpOwner(containerID);
  return owner !== undefined
    ? `\`ipam-shim agent-ip release --owner ${owner}\` then \`ipam-shim agent-ip allocate --owner ${owner}\` (the new address is checked)`
    : `cilium-agent allocated ${containerID} itself through the IPAM plugin (ipam-shim agent-ip manages only cilium-agent-<owner>): restart cilium-agent on this node so it releases and allocates it again`;
}

/**
 * What re-allocates a lost or unfinished agent attachment: agent-ip for its own, a restart of cilium-agent for
 * the ones cilium-agent allocated itself (it asks the IPAM plugin again when it starts).
 */
export function agentReallocateFix(containerID: string): string {
  const owner = agentIpOwner(containerID);
  return owner !== undefined
    ? `ipam-shim agent-ip allocate --owner ${owner} (re-checks and re-allocates if needed)`
    : `restart cilium-agent on this node: it allocated ${containerID} itself through the IPAM plugin and allocates it again when it starts (ipam-shim agent-ip manages only cilium-agent-<owner>)`;
}
