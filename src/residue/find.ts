// What residue exists for a set of pod IPs (read-only: CHECK, `residue scan`, and the listing clean.ts removes
// from). The matching is pure and exact (10.240.0.3 never matches 10.240.0.32); the effects list once per ebtables
// backend that may hold rules (backends.ts).
import { CniError, ErrorCode } from '../cni/errors.js';
import { listPrerouting } from '../effects/ebtables.js';
import { probeBackends } from '../effects/ebtables-probe.js';
import type { Run } from '../effects/exec.js';
import { listPermanentNeighbours } from '../effects/neigh.js';
import type { Neighbour } from '../net/neighbour.js';
import { listRoutes } from '../effects/routes.js';
import type { Route } from '../net/route.js';
import { parsePrerouting, type ResidueRule } from './parse.js';
import { addressOf, familyOf } from '../net/ip.js';
import { normaliseMac } from '../net/mac.js';
import { hostRouteDevices, isPodOwnNeighbour } from './own.js';
import { readNodeAddresses } from '../effects/node-addresses.js';
import { pointsAtNode, refusal, routeGateways, type NodeFacts } from './cleanable.js';
import { chooseBackends, type BackendChoice, type BackendName, type BackendSetting } from './backends.js';
import { span } from '../spans.js';

/** One ebtables backend as a listing found it: read (with its per-pod rule count), or unavailable and why. */
export interface BackendStatus {
  name: BackendName;
  /** The program run (absent when none was). */
  program?: string;
  available: boolean;
  /** Unavailable: why (not installed, the kernel cannot serve it, no nat table, not selected). */
  reason?: string;
  /** Unavailable although the kernel may hold its tables: rules there could not be looked at. */
  blind?: boolean;
  /** Read: the per-pod-shaped rules it holds (after the caller's pre-filter). */
  rules?: number;
}

export interface PreroutingListing {
  /** false: no backend could be read (no ebtables, or no nat table / PREROUTING chain in any). */
  available: boolean;
  /** Every backend's per-pod rules, each tagged with its backend and program. */
  rules: ResidueRule[];
  /** Per backend: read or unavailable (never "no rules" for a backend that was not read). */
  backends: BackendStatus[];
}

/**
 * The backends to read on this node: file probes over the runtime's PATH (the one the programs run with). One
 * answer is reused for a second (the IPAM slot's early listing and the cleanup of the same ADD probe once); the
 * agent's passes, seconds apart, probe afresh (a module loaded meanwhile is seen). Holds one entry, never more.
 */
export function nodeBackends(setting: BackendSetting = 'auto'): BackendChoice {
  const key = JSON.stringify([process.env.PATH, setting]);
  const now = Date.now();
  if (last && last.key === key && now - last.at < 1000 && now >= last.at) return last.choice;
  const probed = span('residue.backends'); // the file probes' cost, in the log line's timings
  const choice = chooseBackends(probeBackends(process.env.PATH), setting);
  probed.end();
  last = { key, at: now, choice };
  return choice;
}
let last: { key: string; at: number; choice: BackendChoice } | undefined;

/**
 * The per-pod rules (arpreply/dnat4/dnat6 shapes) of the nat PREROUTING chain of every chosen backend: one
 * listing per backend (effects/ebtables.ts), concurrently, parsed here. Node-wide and unrecognised rules are
 * parsed but dropped. A backend that is not installed, that the kernel cannot serve or that has no nat table is
 * `available: false` in `backends`, never a failure; any other listing failure throws. `mayName` skips rules
 * that cannot concern the caller (see parsePrerouting). `choice` defaults to nodeBackends().
 */
export async function listPreroutingResidue(
  run: Run,
  mayName?: (rule: string) => boolean,
  choice: BackendChoice = nodeBackends(),
): Promise<PreroutingListing> {
  const read = await Promise.all(
    choice.read.map(async (b): Promise<{ status: BackendStatus; rules: ResidueRule[] }> => {
      const listed = await listPrerouting(run, b.program);
      if (!listed.available) return { status: { ...b, available: false, reason: listed.reason }, rules: [] };
      const parsed = parsePrerouting(listed.text, mayName);
      if (!parsed.chainSeen) return { status: { ...b, available: false, reason: 'no nat PREROUTING chain' }, rules: [] };
      const rules = parsed.rules.filter((x): x is ResidueRule => x.kind !== 'other').map((r) => ({ ...r, backend: b.name, program: b.program }));
      return { status: { ...b, available: true, rules: rules.length }, rules };
    }),
  );
  const skipped = choice.skipped.map(
    (s): BackendStatus => ({ name: s.name, available: false, reason: s.reason, ...(s.blind ? { blind: true } : {}) }),
  );
  return {
    available: read.some((x) => x.status.available),
    rules: read.flatMap((x) => x.rules),
    backends: [...read.map((x) => x.status), ...skipped],
  };
}

export interface ResidueSnapshot {
  rules: ResidueRule[];
  neighbours: Neighbour[];
}

export interface FindOptions {
  /** The pod's own host-side interfaces from its CNI result (resultHostDevices): their entries are never residue. */
  excludeDevs?: string[];
  /** hostRouteDevices of the node's routes; the effectful functions below read them when a neighbour needs it. */
  routed?: ReadonlyMap<string, ReadonlySet<string>>;
  /** The node's addresses, MACs and next hops (readNodeFacts); the effectful functions read them when residue is found. */
  node?: NodeFacts;
}

/** Residue-shaped rules and entries left alone because they are the node's own (src/residue/cleanable.ts). */
export interface Spared {
  target: string;
  why: string;
}

/**
 * PURE. The per-pod rules and PERMANENT neighbour entries for exactly `ips`. `ips` may be plain addresses or
 * CNI interface notation (`10.240.0.32/16`: the prefix is the subnet, the address is what is matched).
 * Dynamic neighbour entries are left alone: the kernel revalidates them, only PERMANENT ones outlive a pod.
 * With `opts.node`, the node's own plumbing (cleanable.ts: its addresses, next hops, rules to its MACs) is left
 * out and listed in `spared`. Throws on a string that is not an address, so a typo cannot silently match nothing.
 */
export function findResidue(ips: readonly string[], snapshot: ResidueSnapshot, opts: FindOptions = {}): ResidueSnapshot & { spared: Spared[] } {
  const targets = new Set(ips.map(hostAddress));
  const own = { devs: opts.excludeDevs ?? [], ...(opts.routed ? { routed: opts.routed } : {}) };
  const spared: Spared[] = [];
  const node = opts.node;
  const nodeOwn = (ip: string, mac: string | undefined, target: string): boolean => {
    if (!node) return false;
    const r = refusal(ip, node);
    const why =
      r?.why ?? (mac && pointsAtNode({ mac }, node) ? `${mac} is a MAC of this node (${node.macs.get(mac)}): it delivers to the node` : undefined);
    if (why) spared.push({ target, why });
    return why !== undefined;
  };
  return {
    rules: snapshot.rules.filter((r) => targets.has(r.ip) && !nodeOwn(r.ip, r.mac, ruleTarget(r))),
    neighbours: snapshot.neighbours.filter(
      (n) =>
        targets.has(n.ip) && n.state.includes('PERMANENT') && !isPodOwnNeighbour(n, own) && !nodeOwn(n.ip, undefined, `neigh ${n.ip} dev ${n.dev}`),
    ),
    spared,
  };
}

/** The node's own addresses, MACs (`ip -j addr`) and next hops (its routes, read unless given), concurrently. */
export async function readNodeFacts(run: Run, routes?: readonly Route[]): Promise<NodeFacts> {
  const [addrs, listed] = await Promise.all([readNodeAddresses(run), routes ?? listRoutes(run)]);
  return { ...addrs, gateways: routeGateways(listed) };
}

/**
 * findResidue with the pod-own rule and the node-own rule applied in full: when anything is found, the node's
 * addresses and routes are read (only then: most calls find none), entries on the interface the host routes that
 * exact address through are dropped (src/residue/own.ts), and the node's own plumbing is spared
 * (src/residue/cleanable.ts). A failing read throws CniError 102: what could not be told apart is never removed.
 */
export async function findResidueOnNode(
  run: Run,
  ips: readonly string[],
  snapshot: ResidueSnapshot,
  opts: FindOptions = {},
): Promise<ResidueSnapshot & { spared: Spared[] }> {
  const found = findResidue(ips, snapshot, opts);
  const needRoutes = found.neighbours.length > 0 && !opts.routed;
  const needNode = found.rules.length + found.neighbours.length > 0 && !opts.node;
  if (!needRoutes && !needNode) return found;
  let routed = opts.routed;
  let node = opts.node;
  try {
    const routes = await listRoutes(run);
    if (needRoutes) routed = hostRouteDevices(routes);
    if (needNode) node = await readNodeFacts(run, routes);
  } catch (e) {
    throw new CniError(ErrorCode.ResidueCleanupFailed, "reading the node's addresses and routes to tell residue from the node's own", {
      details: messageOf(e),
      cause: e,
    });
  }
  return findResidue(ips, snapshot, { ...opts, ...(routed ? { routed } : {}), ...(node ? { node } : {}) });
}

/**
 * PURE. Per-pod-shaped rules whose MAC is on no local interface: candidates for a report, never for automatic
 * deletion (an azure-vnet pod's MAC lives in its own netns, so a live azure pod looks the same from here).
 */
export function findOrphans(rules: readonly ResidueRule[], localMacs: Iterable<string>): ResidueRule[] {
  const local = new Set([...localMacs].map((m) => normaliseMac(m) ?? m));
  return rules.filter((r) => !local.has(r.mac));
}

export interface ResidueOptions extends FindOptions {
  /** Look at ebtables nat PREROUTING (default true). */
  ebtables?: boolean;
  /** Which ebtables backends (residue.ebtablesBackends; default auto). */
  backends?: BackendSetting;
  /** Look at neighbour entries (default true). */
  neigh?: boolean;
}

/** The residue on the node for some addresses (listResidueFor: CHECK, `residue scan`), with the backends read. */
export interface NodeResidue extends ResidueSnapshot {
  /** false when no backend could be read (see ebtablesBackends for each one's reason). */
  ebtablesAvailable: boolean;
  ebtablesBackends: BackendStatus[];
}

/** Read-only (CHECK, `residue scan`): the residue present now for `ips`. Listing failures throw CniError 102. */
export async function listResidueFor(run: Run, ips: readonly string[], opts: ResidueOptions = {}): Promise<NodeResidue> {
  const snap = await snapshot(run, opts, ips);
  return { ebtablesAvailable: snap.ebtablesAvailable, ebtablesBackends: snap.backends, ...(await findResidueOnNode(run, ips, snap, opts)) };
}

/**
 * A cheap pre-filter for the listing: an IPv4 rule can only name a target if the target's text occurs in it
 * (ebtables prints IPv4 dotted, with or without /32); IPv6 rules are always classified, since their printed
 * form (shortened or not) is up to the ebtables build.
 */
export function mayNameAny(ips: readonly string[]): (rule: string) => boolean {
  const v4 = ips.map(hostAddress).filter((ip) => familyOf(ip) === 4);
  return (rule) => rule.includes('--ip6-dst') || v4.some((ip) => rule.includes(ip));
}

export interface Snapshot extends ResidueSnapshot {
  ebtablesAvailable: boolean;
  backends: BackendStatus[];
  choice: BackendChoice;
}

export async function snapshot(run: Run, opts: ResidueOptions, ips: readonly string[]): Promise<Snapshot> {
  try {
    // A span for the log line's timings.
    const families = { v4: ips.some((ip) => familyOf(ip) === 4), v6: ips.some((ip) => familyOf(ip) === 6) };
    const choice = opts.ebtables === false ? { read: [], skipped: [] } : nodeBackends(opts.backends);
    using listing = span('residue.list');
    const [eb, neighbours] = await Promise.all([
      opts.ebtables === false ? { available: false, rules: [], backends: [] } : listPreroutingResidue(run, mayNameAny(ips), choice),
      opts.neigh === false ? [] : listPermanentNeighbours(run, families),
    ]);
    listing.end();
    return { ebtablesAvailable: eb.available, rules: eb.rules, neighbours, backends: eb.backends, choice };
  } catch (e) {
    throw new CniError(ErrorCode.ResidueCleanupFailed, 'listing residue', { details: messageOf(e), cause: e });
  }
}

function hostAddress(ip: string): string {
  const addr = addressOf(ip);
  if (!addr) throw new TypeError(`not an IP address: ${JSON.stringify(ip)}`);
  return addr;
}

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A rule as reports and errors name it: its text, prefixed with the backend when it is not the node's plain one. */
export function ruleTarget(r: ResidueRule): string {
  return r.backend && r.backend !== 'ebtables' ? `[${r.backend}] ${r.text}` : r.text;
}
