// The IPv6 load-balancer probe rewrite (docs/probe-rewrite.md): Azure's LB probes IPv6 backends from a link-local
// source, which a node must not forward, so the node rewrites it to a global address on the way in and back on
// the way out. Stateless, at raw priority (-300, before conntrack): iptables cannot express this.
// PURE: the ruleset, its expected shape, and parsing what nft and tc list (the I/O is effects/probe-rewrite.ts).
import { exactIPv6 } from '../net/ip.js';
import * as z from '../cni/zod.js';
import { CniError, ErrorCode } from '../cni/errors.js';

/**
 * AgentBaker's table name. Never rename: nodes provisioned by AgentBaker already carry this table (we take it
 * over instead of adding a second rewrite), and ACN's ipv6-hp-bpf deletes exactly this name when it takes over.
 */
export const PROBE_TABLE = 'azureSLBProbe';
/** Azure LB's probe source and AgentBaker's global stand-in for it (docs/probe-rewrite.md); both configurable. */
export const DEFAULT_PROBE_SOURCE = 'fe80::1234:5678:9abc';
export const DEFAULT_PROBE_GLOBAL = '2603:1062:0:1:fe80:1234:5678:9abc';

export interface ProbeRewriteOptions {
  /** Interface the probes arrive on (e.g. eth0). */
  uplink: string;
  /** Link-local source the load balancer probes from. */
  probeSource?: string;
  /** Global address the source is rewritten to while the packet is inside the node. */
  probeGlobal?: string;
}

export interface PacketCounter {
  packets: number;
  bytes: number;
}

export interface ResolvedOptions {
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

/** The uplink is interpolated into an nft script: only what Linux interface names use, no quotes or spaces. */
export function safeUplinkName(name: string): boolean {
  return /^[A-Za-z0-9_.-]{1,15}$/.test(name) && name !== '.' && name !== '..';
}

/**
 * The probe-rewrite settings as every ADD will check them (CniError 7 naming the field), for those given: `install`
 * refuses a config that fails here before writing it.
 */
export function checkProbeSettings(opts: Partial<ProbeRewriteOptions>): void {
  if (opts.uplink !== undefined && !safeUplinkName(opts.uplink)) {
    throw invalid(`uplink: not an interface name: ${JSON.stringify(opts.uplink)}`);
  }
  if (opts.probeSource !== undefined) canonicalIPv6(opts.probeSource, 'probeSource');
  if (opts.probeGlobal !== undefined) canonicalIPv6(opts.probeGlobal, 'probeGlobal');
}

/** The options with defaults filled in and addresses canonical; CniError(7) on bad ones. PURE. */
export function resolveOptions(opts: ProbeRewriteOptions): ResolvedOptions {
  checkProbeSettings({ uplink: opts.uplink });
  return {
    uplink: opts.uplink,
    probeSource: canonicalIPv6(opts.probeSource ?? DEFAULT_PROBE_SOURCE, 'probeSource'),
    probeGlobal: canonicalIPv6(opts.probeGlobal ?? DEFAULT_PROBE_GLOBAL, 'probeGlobal'),
  };
}

/**
 * THE rule for a probe address (the `probeSource`/`probeGlobal` settings and the CLI's `--probe-source`/
 * `--probe-global`): a plain IPv6 address, in RFC 5952 text (what nft prints, so a config spelled `FE80:0:0::…`
 * still compares equal to the listing); undefined for anything else. ip-num, not node:net's isIPv6: compiling its
 * regular expression cost ~7 ms of every dual-stack ADD. No zone ids (fe80::1%eth0), no prefix (a rule matches one
 * address), no IPv4-mapped address (src/net/ip.ts's rule).
 */
export function plainIPv6(addr: string): string | undefined {
  return addr.includes('%') || addr.includes('/') ? undefined : exactIPv6(addr);
}

function canonicalIPv6(addr: string, field: string): string {
  const canonical = plainIPv6(addr);
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
        expr: [
          dev('iifname'),
          { match: { op: '==', left: { payload: { protocol: 'icmpv6', field: 'type' } }, right: { set: nd } } },
          counter,
          { accept: null },
        ],
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

const QdiscsSchema = z.array(z.object({ kind: z.string() }));
const FiltersSchema = z.array(z.object({ kind: z.string(), options: z.optional(z.object({ bpf_name: z.optional(z.string()) })) }));

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
