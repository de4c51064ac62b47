// cilium-agent's own IPs under delegated IPAM (design-cfps #13): allocate through the delegate with a
// deterministic container ID, idempotently across restarts, recorded as owner `agent` so GC never
// releases them. Every address it answers with got every fix's cure, as a pod's at ADD (src/contract/address-loop.ts, over
// the list of fixes the CLI hands the command).
import { AGENT_OWNER, agentContainerID } from '../ledger/owner.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateConf, type NetConf } from '../cni/config.js';
import { resultIps, resultSubnets } from '../cni/result.js';
import type { IpamDelegate } from '../effects/delegate.js';
import { checkVersionOf, hostPrevResult, type CheckProof } from '../effects/check-proof.js';
import { agentIpCniArgs, delegateEnvFor, identityOf } from '../ledger/identity.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Run } from '../effects/exec.js';
import { deleteNetns, ensureNetns } from '../effects/netns.js';
import { prepareAddresses, validateFixes } from '../contract/address-loop.js';
import type { Fix } from '../contract/fix.js';
import type { Logger } from '../log.js';
import { familyOf } from '../net/ip.js';

const AGENT_IFNAME = 'eth0';
/** An empty namespace per owner: the CFP's CNI_NETNS for IPs that live in no pod. */
const agentNetnsName = (owner: string): string => `ipam-shim-agent-${owner}`;

export type Family = '4' | '6' | 'dual';
type AgentAction = 'reused' | 'allocated' | 'reallocated' | 'unverified';

export interface AgentDeps {
  conf: NetConf;
  ledger: LedgerStore;
  delegate: IpamDelegate;
  run: Run;
  log: Logger;
  /** Every fix (the registry's list, handed down by the CLI): each one's refusal and cure runs on the addresses. */
  fixes: readonly Fix[];
}

export interface AgentAllocation {
  owner: string;
  network: string;
  containerID: string;
  ips: string[];
  action: AgentAction;
  /** The CNI_ARGS its delegate calls carry (src/ledger/identity.ts). */
  identity: string;
  /** How a kept allocation was confirmed this time (`none`: unverified). */
  verifiedBy?: 'check' | 'add' | 'none';
  note?: string;
}

export function validateOwner(owner: string): void {
  if (!AGENT_OWNER.test(owner))
    throw new CniError(ErrorCode.InvalidEnvironment, `invalid owner ${JSON.stringify(owner)}`, { details: `must match ${AGENT_OWNER.source}` });
}

/** The addresses of the requested family (all when none was asked for); a missing family is an error. */
function pickFamily(ips: string[], family: Family | undefined): string[] {
  if (!family) return ips;
  const want = (ip: string) => family === 'dual' || String(familyOf(ip)) === family;
  const picked = ips.filter(want);
  const need = family === 'dual' ? ['4', '6'] : [family];
  for (const f of need) {
    if (!ips.some((ip) => String(familyOf(ip)) === f)) {
      throw new CniError(ErrorCode.InvalidNetworkConfig, `the delegate handed out no IPv${f} address`, {
        details: `got ${ips.join(', ') || 'nothing'}`,
      });
    }
  }
  return picked;
}

/**
 * Every fix's refusal and cure for the addresses, as ADD runs them for a pod's (the agent's namespace has no
 * host-side interface of its own): reserved ones refused (100), azure-vnet residue removed, the IPv6 probe rewrite
 * ensured. Returns what the fixes tallied (residue removed, …), for the log.
 */
async function cureAddresses(d: AgentDeps, ips: string[]): Promise<Record<string, number>> {
  const cured: Record<string, number> = {};
  const tally = (name: string, by: number) => {
    if (by) cured[name] = (cured[name] ?? 0) + by;
  };
  await prepareAddresses(d.fixes, { conf: d.conf, run: d.run, log: d.log, ips, ownDevs: [], tally });
  return cured;
}

/**
 * The CNI_ARGS a delegate call for the owner's record carries: its recorded identity (an older shim's agent-ip
 * record: '', the identity it was allocated under), or the owner's own (src/ledger/identity.ts) for a new one.
 */
function heldIdentity(owner: string, rec: LedgerRecord | undefined): string {
  const id = rec ? identityOf(rec) : undefined;
  return id && id.kind !== 'unknown' ? id.cniArgs : agentIpCniArgs(owner);
}

/**
 * Allocate (or keep) the owner's IPs. Serialised per owner, so two agents never double-allocate. A refused or
 * failed cure releases the allocation through the delegate and forgets the record: nothing leaked, nothing recorded.
 * Every delegate call carries the owner's identity (src/ledger/identity.ts): a pod-keyed IPAM (CNS) keeps each
 * owner's addresses apart and never releases one owner's through another's DEL.
 */
export async function allocateAgentIp(d: AgentDeps, owner: string, family?: Family): Promise<AgentAllocation> {
  return (await allocate(d, owner, family, false))!;
}

/**
 * The agent's pass: what allocate does, for an owner that is still recorded (checked under the owner's lock):
 * undefined when it is not, so an owner released meanwhile (the feature turned off) is never allocated again.
 */
export async function confirmAgentIp(d: AgentDeps, owner: string): Promise<AgentAllocation | undefined> {
  return allocate(d, owner, undefined, true);
}

async function allocate(d: AgentDeps, owner: string, family: Family | undefined, ifRecorded: boolean): Promise<AgentAllocation | undefined> {
  validateOwner(owner);
  validateFixes(d.fixes, d.conf); // a fix's bad setting (reservedCIDRs, …) is 7 before the delegate allocates anything
  return d.ledger.lockedAgentOwner(owner, async () => {
    const containerID = agentContainerID(owner);
    const att = { containerID, ifname: AGENT_IFNAME };
    const existing = await d.ledger.get(att);
    if (ifRecorded && !existing) return undefined;
    const made = await ensureNetns(d.run, agentNetnsName(owner));
    // What this call started (the delegate's ADD, the record, the namespace): a new owner's failed allocation
    // undoes all of it, so nothing is left that `agent-ip list` does not show (a missing delegate left the
    // namespace). An owner recorded before keeps its record (the agent's pass retries it) and its namespace.
    const sent: SentAdd = {};
    try {
      return await allocateIn(d, owner, family, existing, made.path, sent);
    } catch (e) {
      if (!existing) {
        if (sent.add) await d.delegate.del(delegateConf(d.conf, sent.add.version), sent.add.env).catch(() => undefined);
        await d.ledger.remove(att).catch(() => undefined);
        if (made.created) await deleteNetns(d.run, agentNetnsName(owner));
      }
      throw e;
    }
  });
}

/** The delegate's ADD this call sent and has not released yet (set before it is sent: it may allocate and fail). */
interface SentAdd {
  add?: { env: NodeJS.ProcessEnv; version: string };
}

/** allocate's work once the owner's namespace exists; `sent` says what ADD is out (see SentAdd). */
async function allocateIn(
  d: AgentDeps,
  owner: string,
  family: Family | undefined,
  existing: LedgerRecord | undefined,
  netns: string,
  sent: SentAdd,
): Promise<AgentAllocation> {
  const containerID = agentContainerID(owner);
  const att = { containerID, ifname: AGENT_IFNAME };
  const version = await d.delegate.versionFor(d.conf.cniVersion);
  const heldEnv = delegateEnvFor(att, heldIdentity(owner, existing), netns);
  const newArgs = agentIpCniArgs(owner);
  const newEnv = delegateEnvFor(att, newArgs, netns);
  // A refused or failed allocation leaves nothing: the delegate's DEL, the record forgotten, then the error.
  const undo = async (ips: string[], e: unknown, env: NodeJS.ProcessEnv): Promise<never> => {
    await d.delegate.del(delegateConf(d.conf, version), env).catch(() => undefined);
    sent.add = undefined;
    await d.ledger.remove(att).catch(() => undefined);
    d.log.warn({ owner, ips, err: e }, 'agent IP not handed out: released');
    throw e;
  };
  let note: string | undefined;
  if (existing?.state === 'attached' && existing.ips.length) {
    const verdict = await verifyWithDelegate(d, existing, version, heldEnv, netns);
    if (verdict.kind === 'held' || verdict.kind === 'unverified') {
      // Kept, and cured again: residue may be back since, and reservedCIDRs may now cover it.
      const cured = await cureAddresses(d, existing.ips).catch((e: unknown) => undo(existing.ips, e, heldEnv));
      if (Object.keys(cured).length) d.log.info({ owner, ips: existing.ips, cured }, 'agent IP cured');
      const by = verdict.kind === 'held' ? verdict.by : 'none';
      const why = verdict.kind === 'unverified' ? verdict.reason : undefined;
      // Written when the way it is confirmed changes (`at`: since when): the agent confirms every pass, and an
      // agent record's write is fsynced.
      if (existing.verified?.by !== by || existing.verified.why !== why)
        await d.ledger.put({ ...existing, verified: { by, at: new Date().toISOString(), ...(why ? { why } : {}) } });
      const ips = pickFamily(existing.ips, family);
      if (verdict.kind === 'held')
        return { owner, network: d.conf.name, containerID, ips, action: 'reused', identity: heldEnv.CNI_ARGS!, verifiedBy: by };
      d.log.warn({ owner, ips: existing.ips, reason: verdict.reason }, 'agent IP unverified: kept, but nothing proves the delegate still holds it');
      return {
        owner,
        network: d.conf.name,
        containerID,
        ips,
        action: 'unverified',
        identity: heldEnv.CNI_ARGS!,
        note: verdict.reason,
        verifiedBy: by,
      };
    }
    note = `delegate no longer holds ${existing.ips.join(', ')} (${verdict.reason}); released and allocated again`;
    d.log.warn({ owner, ips: existing.ips, reason: verdict.reason }, 'agent IP lost by the delegate: DEL then ADD');
  } else if (existing) {
    note = 'a previous allocation did not complete; released and allocated again';
  }
  // DEL first, always, under the identity the owner held: a crash after an earlier delegate ADD must not leave a
  // second allocation behind (the intent record below already carries the identity that ADD used).
  await d.delegate.del(delegateConf(d.conf, version), heldEnv).catch((e) => d.log.info({ err: e }, 'agent DEL before ADD failed (ignored)'));
  const now = new Date().toISOString();
  const base: LedgerRecord = {
    v: 1,
    ...att,
    network: d.conf.name,
    owner: 'agent',
    state: 'intent',
    placement: 'cli',
    ips: [],
    netns,
    createdAt: existing?.createdAt ?? now,
    updatedAt: now,
    cniArgs: newArgs,
    ...(note ? { note } : {}),
  };
  await d.ledger.remove(att);
  await d.ledger.put(base);
  sent.add = { env: newEnv, version };
  const result = await d.delegate.add(delegateConf(d.conf, version), d.conf.cniVersion, newEnv);
  // Canonical text, as the verbs record (Delegate.add refused any address src/net/ip.ts does not take).
  const ips = resultIps(result, { delegate: d.delegate.type });
  try {
    if (!ips.length) throw new CniError(ErrorCode.DelegateFailed, `delegate ${d.delegate.type} returned no IP addresses`);
    const cured = await cureAddresses(d, ips);
    const subnets = resultSubnets(result);
    await d.ledger.put({ ...base, state: 'attached', ips, ...(subnets.length && { subnets }), updatedAt: new Date().toISOString() });
    const picked = pickFamily(ips, family);
    d.log.info({ owner, ips, note, cured }, 'agent IP allocated');
    return {
      owner,
      network: d.conf.name,
      containerID,
      ips: picked,
      action: existing ? 'reallocated' : 'allocated',
      identity: newArgs,
      ...(note ? { note } : {}),
    };
  } catch (e) {
    return undo(ips, e, newEnv);
  }
}

/**
 * Whether the delegate still holds a recorded allocation, asked under the owner's identity:
 * - its CHECK, where CHECK can fail (Delegate.checkProof: host-local's does; azure-ipam's answers success to anything);
 * - otherwise a repeated ADD with the same identity (proof for delegates idempotent per identity, as CNS is): the
 *   same addresses → held; others → `moved` (the store forgot them and handed out new ones); a failed ADD (host-local
 *   refuses a duplicate) → `unverified`, never held.
 */
type Verdict = { kind: 'held'; by: 'check' | 'add' } | { kind: 'lost'; reason: string } | { kind: 'unverified'; reason: string };

async function verifyWithDelegate(d: AgentDeps, rec: LedgerRecord, version: string, env: NodeJS.ProcessEnv, netns: string): Promise<Verdict> {
  // CHECK in the highest version both speak (a 0.3.1 list has none, its delegate may); the ADD in the list's.
  const checkVersion = checkVersionOf(await d.delegate.supportedVersions()) ?? version;
  const confFor = (prevResult: Record<string, unknown>) => delegateConf(d.conf, checkVersion, { prevResult });
  const proof = await d.delegate.checkProof(confFor, checkVersion, netns);
  if (proof === 'proves') {
    try {
      await d.delegate.check(confFor(hostPrevResult(rec.ips, checkVersion)), env);
      return { kind: 'held', by: 'check' };
    } catch (e) {
      return { kind: 'lost', reason: e instanceof Error ? e.message : String(e) };
    }
  }
  const noCheck = CHECK_PROOF_WHY[proof];
  let again: string[];
  try {
    again = resultIps(await d.delegate.add(delegateConf(d.conf, version), d.conf.cniVersion, env), { delegate: d.delegate.type });
  } catch (e) {
    return { kind: 'unverified', reason: `${noCheck}, and a repeated ADD for its identity failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (sameAddresses(again, rec.ips)) return { kind: 'held', by: 'add' };
  return { kind: 'lost', reason: `${noCheck}; a repeated ADD for its identity answered ${again.join(', ') || 'nothing'}` };
}

/** Why CHECK could not confirm an address, by what the probe learnt (Delegate.checkProof). */
const CHECK_PROOF_WHY: Record<Exclude<CheckProof, 'proves'>, string> = {
  'proves-nothing': 'CHECK proves nothing (answered success for an attachment it never allocated)',
  'no-check': 'the delegate speaks no version with CHECK (below 0.4.0)',
  unknown: 'CHECK could not be probed (the delegate gave no answer of its own)',
};

const sameAddresses = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');

/** Release the owner's IPs (feature turned off): delegate DEL, forget the record, remove the namespace. */
export async function releaseAgentIp(d: AgentDeps, owner: string): Promise<{ owner: string; released: string[] }> {
  validateOwner(owner);
  return d.ledger.lockedAgentOwner(owner, async () => {
    const att = { containerID: agentContainerID(owner), ifname: AGENT_IFNAME };
    const rec = await d.ledger.get(att);
    const version = await d.delegate.versionFor(d.conf.cniVersion);
    await d.delegate.del(delegateConf(d.conf, version), delegateEnvFor(att, heldIdentity(owner, rec)));
    await d.ledger.remove(att);
    await deleteNetns(d.run, agentNetnsName(owner));
    d.log.info({ owner, ips: rec?.ips ?? [] }, 'agent IP released');
    return { owner, released: rec?.ips ?? [] };
  });
}

export async function listAgentIps(ledger: Pick<LedgerStore, 'list'>): Promise<LedgerRecord[]> {
  return (await ledger.list()).records.filter((r) => r.owner === 'agent');
}
