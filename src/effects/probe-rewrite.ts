// The IPv6 load-balancer probe rewrite (field notes §3): Azure's LB probes IPv6 backends from a link-local
// source, which a node must not forward, so the node rewrites it to a global address on the way in and back on
// the way out. Stateless, at raw priority (-300, before conntrack): iptables cannot express this.
import { exactIPv6 } from '../net/ip.js';
import * as z from '../cni/zod.js';
import { CniError, ErrorCode, ToolError } from '../cni/errors.js';
import type { Run } from './exec.js';

/**
 * AgentBaker's table name. Never rename: nodes provisioned by AgentBaker already carry this table (we take it
 * over instead of adding a second rewrite), and ACN's ipv6-hp-bpf deletes exactly this name when it takes over.
 */
export const PROBE_TABLE = 'azureSLBProbe';
/** Azure LB's probe source and AgentBaker's global stand-in for it (field notes §3); both configurable. */
export const DEFAULT_PROBE_SOURCE = 'fe80::1234:5678:9abc';
export const DEFAULT_PROBE_GLOBAL = '2603:1062:0:1:fe80:1234:5678:9abc';

const NFT_TIMEOUT_MS = 10_000;
const TOOL_TIMEOUT_MS = 5_000;

export interface ProbeRewriteOptions {
  /** Interface the probes arrive on (e.g. eth0). */
  uplink: string;
  /** Link-local source the load balancer probes from. */
  probeSource?: string;
  /** Global address the source is rewritten to while the packet is inside the node. */
  probeGlobal?: string;
}

/** nft is absent (or the kernel has no nf_tables): a result, not a crash, so ADD can degrade and doctor can say so. */
export interface NftUnavailable {
  available: false;
  reason: string;
}

export interface PacketCounter {
  packets: number;
  bytes: number;
}

export type ProbeRewriteStatus =
  | NftUnavailable
  | {
      available: true;
      /** handled-by-bpf wins over present: the table is then redundant (and ipv6-hp-bpf will delete it). */
      state: 'present' | 'absent' | 'handled-by-bpf';
      uplink: string | null;
      tablePresent: boolean;
      /** Counters of the rewrite rules only (the ND accept rule's counter is not probe traffic). */
      counters: { prerouting: PacketCounter; postrouting: PacketCounter };
      /** The table is exactly what ensureProbeRewrite(opts) installs (chains, hooks, rules; counters ignored). */
      matchesExpected: boolean;
    };

export type ProbeRewriteDue = NftUnavailable | { available: true; due: boolean; tablePresent: boolean };

// ---------------------------------------------------------------------------------------------------------
// Pure part: the ruleset, the expected shape, parsing nft's JSON.

interface ResolvedOptions {
  uplink: string;
  probeSource: string;
  probeGlobal: string;
}

/**
 * The full `nft -f -` script. PURE. Declare + delete + define in one transaction: atomic, so concurrent callers
 * each replace the whole table and the result is always exactly one copy of each rule. `delete table` rather
 * than AgentBaker's `flush table` because flush keeps chains: a chain left with another hook or priority (older
 * version, manual edit) makes the redefinition fail with EOPNOTSUPP, so flush never converges; delete does.
 */
export function probeRewriteRuleset(opts: ProbeRewriteOptions): string {
  const { uplink, probeSource, probeGlobal } = resolveOptions(opts);
  return [
    `table ip6 ${PROBE_TABLE}`,
    `delete table ip6 ${PROBE_TABLE}`,
    `table ip6 ${PROBE_TABLE} {`,
    `\tchain prerouting {`,
    `\t\ttype filter hook prerouting priority -300; policy accept;`,
    // Router discovery must pass untouched, or IPv6 breaks when the RA-learned default route expires.
    `\t\tiifname "${uplink}" icmpv6 type { nd-neighbor-solicit, nd-router-advert, nd-neighbor-advert } counter accept`,
    `\t\tiifname "${uplink}" ip6 saddr ${probeSource} ip6 saddr set ${probeGlobal} counter`,
    `\t}`,
    `\tchain postrouting {`,
    `\t\ttype filter hook postrouting priority -300; policy accept;`,
    `\t\toifname "${uplink}" ip6 daddr ${probeGlobal} ip6 daddr set ${probeSource} counter`,
    `\t}`,
    `}`,
    '',
  ].join('\n');
}

/**
 * The probe-rewrite settings as every ADD will check them (CniError 7 naming the field), for those given: `install`
 * refuses a config that fails here before writing it.
 */
export function checkProbeSettings(opts: Partial<ProbeRewriteOptions>): void {
  // The uplink is interpolated into an nft script: allow only what Linux interface names use, no quotes/spaces.
  if (opts.uplink !== undefined && (!/^[A-Za-z0-9_.-]{1,15}$/.test(opts.uplink) || opts.uplink === '.' || opts.uplink === '..')) {
    throw invalid(`uplink: not an interface name: ${JSON.stringify(opts.uplink)}`);
  }
  if (opts.probeSource !== undefined) canonicalIPv6(opts.probeSource, 'probeSource');
  if (opts.probeGlobal !== undefined) canonicalIPv6(opts.probeGlobal, 'probeGlobal');
}

function resolveOptions(opts: ProbeRewriteOptions): ResolvedOptions {
  checkProbeSettings({ uplink: opts.uplink });
  return {
    uplink: opts.uplink,
    probeSource: canonicalIPv6(opts.probeSource ?? DEFAULT_PROBE_SOURCE, 'probeSource'),
    probeGlobal: canonicalIPv6(opts.probeGlobal ?? DEFAULT_PROBE_GLOBAL, 'probeGlobal'),
  };
}

/** RFC 5952 text (what nft prints), so a config spelled `FE80:0:0::…` still compares equal to the listing. */
function canonicalIPv6(addr: string, field: string): string {
  // ip-num, RFC 5952 form (nft prints that too). Not node:net's isIPv6: compiling its regular expression cost
  // ~7 ms of every dual-stack ADD. No zone ids (fe80::1%eth0) and no prefix: a rule matches one address.
  const canonical = addr.includes('%') || addr.includes('/') ? undefined : exactIPv6(addr);
  if (canonical === undefined) throw invalid(`${field}: not a plain IPv6 address: ${JSON.stringify(addr)}`);
  return canonical;
}

function invalid(details: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, 'invalid ipv6 probe rewrite options', { details });
}

type Json = unknown;

interface ChainInfo {
  type: Json;
  hook: Json;
  prio: Json;
  policy: Json;
}

/** What `nft -j list table ip6 azureSLBProbe` says, reduced to what we compare and count. */
export interface ProbeTable {
  chains: Record<string, ChainInfo>;
  rules: Array<{ chain: string; expr: Json[] }>;
  /** Sets, maps, flowtables, … in our table: we never create them, so any is drift. */
  otherObjects: number;
}

const NftListSchema = z.object({ nftables: z.array(z.record(z.string(), z.unknown())) });

/** Parses `nft -j list table ip6 azureSLBProbe` stdout. PURE. Throws on output that is not nft's JSON. */
export function parseProbeTable(stdout: string): ProbeTable {
  const { nftables } = NftListSchema.parse(JSON.parse(stdout));
  const table: ProbeTable = { chains: {}, rules: [], otherObjects: 0 };
  for (const obj of nftables) {
    if ('metainfo' in obj || 'table' in obj) continue;
    const chain = obj.chain as Record<string, Json> | undefined;
    const rule = obj.rule as Record<string, Json> | undefined;
    if (chain && typeof chain.name === 'string') {
      table.chains[chain.name] = { type: chain.type, hook: chain.hook, prio: chain.prio, policy: chain.policy };
    } else if (rule && typeof rule.chain === 'string' && Array.isArray(rule.expr)) {
      table.rules.push({ chain: rule.chain, expr: rule.expr });
    } else {
      table.otherObjects++;
    }
  }
  return table;
}

/** The chains and rules ensureProbeRewrite installs, in nft's JSON vocabulary (nft 1.0.x). PURE. */
function expectedTable(opts: ProbeRewriteOptions): ProbeTable {
  const { uplink, probeSource, probeGlobal } = resolveOptions(opts);
  const dev = (key: 'iifname' | 'oifname') => ({ match: { op: '==', left: { meta: { key } }, right: uplink } });
  const ip6 = (field: 'saddr' | 'daddr') => ({ payload: { protocol: 'ip6', field } });
  const counter = { counter: { packets: 0, bytes: 0 } };
  const rewrite = (field: 'saddr' | 'daddr', from: string, to: string) => [
    { match: { op: '==', left: ip6(field), right: from } },
    { mangle: { key: ip6(field), value: to } },
    counter,
  ];
  const nd = ['nd-neighbor-solicit', 'nd-router-advert', 'nd-neighbor-advert'];
  const chain = (hook: string): ChainInfo => ({ type: 'filter', hook, prio: -300, policy: 'accept' });
  return {
    chains: { prerouting: chain('prerouting'), postrouting: chain('postrouting') },
    rules: [
      {
        chain: 'prerouting',
        expr: [dev('iifname'), { match: { op: '==', left: { payload: { protocol: 'icmpv6', field: 'type' } }, right: { set: nd } } }, counter, { accept: null }],
      },
      { chain: 'prerouting', expr: [dev('iifname'), ...rewrite('saddr', probeSource, probeGlobal)] },
      { chain: 'postrouting', expr: [dev('oifname'), ...rewrite('daddr', probeGlobal, probeSource)] },
    ],
    otherObjects: 0,
  };
}

/** True when `actual` is exactly what ensureProbeRewrite(opts) installs: counters, handles, set order ignored. PURE. */
export function probeTableMatches(actual: ProbeTable, opts: ProbeRewriteOptions): boolean {
  return canon(actual) === canon(expectedTable(opts));
}

/** Stable text for comparison: sorted keys, sorted set elements, counter values zeroed. */
function canon(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canon).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const obj = value as Record<string, Json>;
  const parts = Object.keys(obj)
    .sort()
    .map((k) => {
      let v = obj[k];
      if (k === 'counter') v = { packets: 0, bytes: 0 };
      if (k === 'set' && Array.isArray(v)) return `${JSON.stringify(k)}:[${v.map(canon).sort().join(',')}]`;
      return `${JSON.stringify(k)}:${canon(v)}`;
    });
  return `{${parts.join(',')}}`;
}

/** Sum of the counters of the rewrite (mangle) rules per chain. PURE. */
export function probeCounters(table: ProbeTable | null): { prerouting: PacketCounter; postrouting: PacketCounter } {
  const out = { prerouting: { packets: 0, bytes: 0 }, postrouting: { packets: 0, bytes: 0 } };
  for (const rule of table?.rules ?? []) {
    if (rule.chain !== 'prerouting' && rule.chain !== 'postrouting') continue;
    const exprs = rule.expr as Array<Record<string, Json>>;
    if (!exprs.some((e) => e && typeof e === 'object' && 'mangle' in e)) continue;
    for (const e of exprs) {
      const c = e?.counter as { packets?: unknown; bytes?: unknown } | undefined;
      if (c && typeof c.packets === 'number' && typeof c.bytes === 'number') {
        out[rule.chain].packets += c.packets;
        out[rule.chain].bytes += c.bytes;
      }
    }
  }
  return out;
}

const DefaultRoutesSchema = z.array(
  z.object({ dev: z.optional(z.string()), metric: z.optional(z.number()), nexthops: z.optional(z.array(z.object({ dev: z.optional(z.string()) }))) }),
);
const QdiscsSchema = z.array(z.object({ kind: z.string() }));
const FiltersSchema = z.array(z.object({ kind: z.string(), options: z.optional(z.object({ bpf_name: z.optional(z.string()) })) }));

/** The interface of the best (lowest metric) default route in `ip -j route show default` stdout. PURE. */
export function parseDefaultRouteDev(stdout: string): string | null {
  const routes = DefaultRoutesSchema.parse(JSON.parse(stdout.trim() || '[]'));
  const sorted = [...routes].sort((a, b) => (a.metric ?? 0) - (b.metric ?? 0));
  for (const r of sorted) {
    const dev = r.dev ?? r.nexthops?.find((n) => n.dev)?.dev; // multipath routes name their devs per nexthop
    if (dev) return dev;
  }
  return null;
}

/**
 * Cilium attaches its own programs to the native device (cil_from_netdev-eth0, older bpf_netdev_eth0.o:[…]);
 * those do not rewrite probes, so they must not count as "handled".
 */
const CILIUM_FILTER = /^(cil_|bpf_(host|netdev|overlay|lxc))/;

/**
 * From `tc -j qdisc show dev X` and `tc -j filter show dev X ingress` stdout: a clsact qdisc with at least one
 * BPF filter on ingress that is not Cilium's. PURE.
 */
export function parseBpfProbeHandler(qdiscJson: string, ingressFilterJson: string): boolean {
  const qdiscs = QdiscsSchema.parse(JSON.parse(qdiscJson.trim() || '[]'));
  if (!qdiscs.some((q) => q.kind === 'clsact')) return false;
  const filters = FiltersSchema.parse(JSON.parse(ingressFilterJson.trim() || '[]'));
  // tc prints a header entry per (pref, kind) without options, then one entry per filter with options.
  return filters.some((f) => f.kind === 'bpf' && f.options !== undefined && !CILIUM_FILTER.test(f.options.bpf_name ?? ''));
}

// ---------------------------------------------------------------------------------------------------------
// Effects.

const LIST_ARGS = ['-j', 'list', 'table', 'ip6', PROBE_TABLE] as const;

/** One `nft -j list table`. null table = absent. Only "nft unusable here" becomes a result; other failures throw. */
export async function listProbeTable(run: Run): Promise<NftUnavailable | { available: true; table: ProbeTable | null }> {
  const r = await run('nft', LIST_ARGS, { check: false, timeoutMs: NFT_TIMEOUT_MS });
  const unavailable = nftUnavailable(r);
  if (unavailable) return unavailable;
  if (r.exitCode === 0) return { available: true, table: parseProbeTable(r.stdout) };
  if (/^Error: No such file or directory/m.test(r.stderr)) return { available: true, table: null };
  throw new ToolError('nft', LIST_ARGS, r.exitCode, r.stderr, { timedOut: r.timedOut });
}

function nftUnavailable(r: { notFound: boolean; stderr: string }): NftUnavailable | null {
  // `exec of "nft" failed` is ip-netns-exec's wording when the Run is runInNetns(ns).
  if (r.notFound || /exec of "nft" failed/.test(r.stderr)) return { available: false, reason: 'nft not found' };
  if (/Protocol not supported/.test(r.stderr)) return { available: false, reason: 'kernel without nf_tables' };
  return null;
}

/**
 * Installs (or repairs) the probe rewrite on `opts.uplink`: the whole `ip6 azureSLBProbe` table in one atomic
 * `nft -f -` transaction. Idempotent and safe to run concurrently (each run replaces the table wholesale, so
 * any number of callers leave one table with one copy of each rule); it resets the table's counters.
 * Owns: only table `ip6 azureSLBProbe` (an AgentBaker-made one is taken over). Tolerates: the table present in
 * any shape; nft missing → `{available: false}`. Does not look for BPF handlers: callers in `auto` mode ask
 * isProbeHandledByBpf first. Throws CniError(7) on bad options, ToolError when nft rejects the script.
 */
export async function ensureProbeRewrite(run: Run, opts: ProbeRewriteOptions): Promise<NftUnavailable | { available: true }> {
  const script = probeRewriteRuleset(opts);
  const r = await run('nft', ['-f', '-'], { input: script, check: false, timeoutMs: NFT_TIMEOUT_MS });
  const unavailable = nftUnavailable(r);
  if (unavailable) return unavailable;
  if (r.exitCode !== 0) throw new ToolError('nft', ['-f', '-'], r.exitCode, r.stderr, { timedOut: r.timedOut });
  return { available: true };
}

/**
 * Deletes table `ip6 azureSLBProbe` and nothing else. Idempotent: absent = success, with no "does it exist"
 * race (declare + delete in one transaction, so it works whether or not the table is there).
 * Tolerates: nft missing → `{available: false}` (there is then nothing we could have installed).
 */
export async function removeProbeRewrite(run: Run): Promise<NftUnavailable | { available: true }> {
  const script = `table ip6 ${PROBE_TABLE}\ndelete table ip6 ${PROBE_TABLE}\n`;
  const r = await run('nft', ['-f', '-'], { input: script, check: false, timeoutMs: NFT_TIMEOUT_MS });
  const unavailable = nftUnavailable(r);
  if (unavailable) return unavailable;
  if (r.exitCode !== 0) throw new ToolError('nft', ['-f', '-'], r.exitCode, r.stderr, { timedOut: r.timedOut });
  return { available: true };
}

/**
 * The cheap check for the ADD path: exactly one `nft -j list table` call; `due` = the table is absent or not
 * exactly what ensureProbeRewrite(opts) would install. Read-only, owns nothing. Tolerates an absent table
 * (due) and nft missing (`{available: false}`). Throws CniError(7) on bad options, ToolError on other nft failures.
 */
export async function probeRewriteDue(run: Run, opts: ProbeRewriteOptions): Promise<ProbeRewriteDue> {
  resolveOptions(opts); // bad options must fail before we spend a process on them
  return probeDue(await listProbeTable(run), opts);
}

/** PURE. probeRewriteDue's verdict on a listing already made (callers that list while finding the uplink). */
export function probeDue(listed: Awaited<ReturnType<typeof listProbeTable>>, opts: ProbeRewriteOptions): ProbeRewriteDue {
  resolveOptions(opts);
  if (!listed.available) return listed;
  const table = listed.table;
  return { available: true, tablePresent: table !== null, due: table === null || !probeTableMatches(table, opts) };
}

/**
 * What the node has for IPv6 probes: our table (state, rewrite counters, exact match) and whether a BPF handler
 * (ACN's ipv6-hp-bpf) sits on the uplink. Read-only. The uplink defaults to defaultUplink6(); the probe
 * addresses to AgentBaker's. Tolerates: no table, no uplink (uplink null, matchesExpected false), tc missing
 * (treated as no BPF handler), nft missing → `{available: false}`.
 */
export async function probeRewriteStatus(run: Run, opts: Partial<ProbeRewriteOptions> = {}): Promise<ProbeRewriteStatus> {
  const uplink = opts.uplink ?? (await defaultUplink6(run));
  if (uplink !== null) resolveOptions({ ...opts, uplink });
  const listed = await listProbeTable(run);
  if (!listed.available) return listed;
  const bpf = uplink !== null && (await isProbeHandledByBpf(run, uplink));
  const table = listed.table;
  return {
    available: true,
    state: bpf ? 'handled-by-bpf' : table ? 'present' : 'absent',
    uplink,
    tablePresent: table !== null,
    counters: probeCounters(table),
    matchesExpected: uplink !== null && table !== null && probeTableMatches(table, { ...opts, uplink }),
  };
}

/**
 * True when `uplink` has a clsact qdisc with a (non-Cilium) BPF filter on ingress, the way ACN's ipv6-hp-bpf
 * attaches; then the nft table is redundant, and installing it races with ipv6-hp-bpf, which deletes it.
 * Read-only (two `tc -j` calls). Tolerates: tc missing, uplink missing, no clsact → false.
 */
export async function isProbeHandledByBpf(run: Run, uplink: string): Promise<boolean> {
  const qdisc = await run('tc', ['-j', 'qdisc', 'show', 'dev', uplink], { check: false, timeoutMs: TOOL_TIMEOUT_MS });
  if (qdisc.exitCode !== 0 || !/"clsact"/.test(qdisc.stdout)) return false; // saves the second call on most nodes
  const filters = await run('tc', ['-j', 'filter', 'show', 'dev', uplink, 'ingress'], { check: false, timeoutMs: TOOL_TIMEOUT_MS });
  if (filters.exitCode !== 0) return false;
  return parseBpfProbeHandler(qdisc.stdout, filters.stdout);
}

/**
 * The interface of the default IPv6 route (`ip -j -6 route show default`), else of the IPv4 default route;
 * null when there is neither (or `ip` is missing). Read-only. Throws ToolError when `ip` itself fails.
 */
export async function defaultUplink6(run: Run): Promise<string | null> {
  for (const family of [['-6'], []]) {
    const args = ['-j', ...family, 'route', 'show', 'default'];
    const r = await run('ip', args, { check: false, timeoutMs: TOOL_TIMEOUT_MS });
    if (r.notFound) return null;
    if (r.exitCode !== 0) throw new ToolError('ip', args, r.exitCode, r.stderr, { timedOut: r.timedOut });
    const dev = parseDefaultRouteDev(r.stdout);
    if (dev) return dev;
  }
  return null;
}
