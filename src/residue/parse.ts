// PURE: turns ebtables nat PREROUTING listings into classified rules. azure-vnet (bridge mode) leaves per-pod
// rules behind (docs/residue.md); this module decides which lines are exactly such a rule and nothing else.
// Classification is deliberately strict: a rule with any option we do not recognise, a negation, a prefix
// shorter than the full address, or a group/broadcast MAC is "other" and is never offered for deletion.
import { exactIPv4, exactIPv6 } from '../net/ip.js';
import { normaliseMac } from '../net/mac.js';
import type { BackendName } from './backends.js';

/** The three per-pod shapes azure-vnet writes. */
type ResidueKind = 'arpreply' | 'dnat4' | 'dnat6';

export interface ResidueRule {
  kind: ResidueKind;
  /** The pod address the rule is for, normalised (no /32, canonical IPv6). */
  ip: string;
  /** The MAC the rule answers with / rewrites to, lowercase and zero-padded. */
  mac: string;
  /** The rule as listed (minus chain prefix, counters, numbering): the exact thing deleted. */
  text: string;
  /** `text` split into argv; `ebtables -t nat -D PREROUTING ...args` deletes exactly this rule. */
  args: string[];
  /** Set by the listing (find.ts): the ebtables backend holding it and the program that deletes it. */
  backend?: BackendName;
  program?: string;
}

interface OtherRule {
  kind: 'other';
  text: string;
  /** Why it is not per-pod residue (for scan reports and tests). */
  reason: string;
}

export type ParsedRule = ResidueRule | OtherRule;

export interface ParsedListing {
  /** A PREROUTING chain header (or an `-A PREROUTING` line) was seen. */
  chainSeen: boolean;
  /** Every PREROUTING rule of the nat table, in listing order. */
  rules: ParsedRule[];
}

/**
 * Parses `ebtables -t nat -L [PREROUTING]` output (any of --Lmac2, --Lc, --Ln) or `ebtables-save [-c]` output.
 * Only rules of the nat table's PREROUTING chain are returned; other chains and tables are skipped.
 */
/**
 * `mayName`: an optional cheap pre-filter on a rule's text; rules it rejects are skipped unclassified (a
 * targeted cleanup on a node with thousands of unrelated rules need not classify them all).
 */
export function parsePrerouting(listing: string, mayName?: (rule: string) => boolean): ParsedListing {
  // Text without a table header (a bare `-L PREROUTING` fragment) is taken to be the nat table.
  let table = 'nat';
  let chain: string | undefined;
  let chainSeen = false;
  const rules: ParsedRule[] = [];
  for (const raw of listing.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    let m: RegExpMatchArray | null;
    if ((m = line.match(/^(?:Bridge table:\s*|\*)(\S+)$/))) {
      table = m[1]!;
      chain = undefined;
      continue;
    }
    // "Bridge chain: X, entries…" in listings, ":X ACCEPT" (policy line) in save format.
    if ((m = line.match(/^(?:Bridge chain:\s*|:)([^,\s]+)/))) {
      chain = m[1]!;
      if (table === 'nat' && chain === 'PREROUTING') chainSeen = true;
      continue;
    }
    if (line === 'COMMIT') continue;
    // save format: "[pcnt:bcnt] -A CHAIN rule..." — the chain is on the line itself.
    const save = line.replace(/^\[\d+:\d+\]\s+/, '').match(/^-A\s+(\S+)\s+(.*)$/);
    if (save) {
      if (table !== 'nat' || save[1] !== 'PREROUTING') continue;
      chainSeen = true;
      if (!mayName || mayName(save[2]!)) rules.push(classifyRule(save[2]!));
      continue;
    }
    if (table !== 'nat' || chain !== 'PREROUTING') continue;
    // --Ln numbering ("1 " with the nft backend, "1. " legacy) precedes the rule.
    const body = line.replace(/^\d+\.?\s+(?=-)/, '');
    if (body.startsWith('-') && (!mayName || mayName(body))) rules.push(classifyRule(body));
  }
  return { chainSeen, rules };
}

/** Classifies one rule body (as printed after the chain name). Counters (`--Lc`) are dropped from the text. */
export function classifyRule(body: string): ParsedRule {
  const text = body.replace(/\s*,\s*pcnt\s*=.*$/, '').trim();
  const other = (reason: string): OtherRule => ({ kind: 'other', text, reason });
  const args = text.split(/\s+/).filter(Boolean);
  if (args.includes('!')) return other('negated match');
  // Quoted values (comments) would not survive a whitespace split, and azure-vnet writes none.
  if (/["']/.test(text)) return other('quoted value');
  const opts = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const key = args[i]!;
    const value = args[i + 1];
    // Every option in the three shapes takes exactly one value; a flag (e.g. --snat-arp) is unknown here.
    if (!key.startsWith('-') || value === undefined || value.startsWith('-')) return other(`unexpected token ${key}`);
    if (opts.has(key)) return other(`repeated option ${key}`);
    opts.set(key, value);
  }
  const shape = SHAPES.find((s) => s.matches(opts));
  if (!shape) return other('not a per-pod shape');
  const unknown = [...opts.keys()].filter((k) => !shape.allowed.has(k));
  if (unknown.length) return other(`extra options ${unknown.join(' ')}`);
  const ip = shape.family === 4 ? exactIPv4(opts.get(shape.ipOpt)!) : exactIPv6(opts.get(shape.ipOpt)!);
  if (!ip) return other(`not a single address: ${opts.get(shape.ipOpt)}`);
  const mac = normaliseMac(opts.get(shape.macOpt)!);
  if (!mac) return other(`bad MAC ${opts.get(shape.macOpt)}`);
  // Broadcast/multicast targets (ff:ff:…, 01:00:5e:…) are node-wide plumbing, never a pod's address.
  if (parseInt(mac.slice(0, 2), 16) & 1) return other(`group MAC ${mac}`);
  return { kind: shape.kind, ip, mac, text, args };
}

interface Shape {
  kind: ResidueKind;
  family: 4 | 6;
  ipOpt: string;
  macOpt: string;
  allowed: Set<string>;
  matches(opts: Map<string, string>): boolean;
}

const proto = (opts: Map<string, string>, names: string[]) => names.includes((opts.get('-p') ?? '').toLowerCase());
// ebtables prints /etc/ethertypes names; without that file it prints hex.
const ARP = ['arp', '0x0806', '0x806'];
const IPV4 = ['ipv4', '0x0800', '0x800'];
const IPV6 = ['ipv6', '0x86dd'];

const SHAPES: Shape[] = [
  {
    kind: 'arpreply',
    family: 4,
    ipOpt: '--arp-ip-dst',
    macOpt: '--arpreply-mac',
    allowed: new Set(['-p', '-i', '--arp-op', '--arp-ip-dst', '-j', '--arpreply-mac', '--arpreply-target']),
    // Only Request: an `--arp-op Reply` rule is the node-wide broadcast rewrite.
    matches: (o) => proto(o, ARP) && o.get('-j') === 'arpreply' && o.get('--arp-op') === 'Request' && o.has('--arp-ip-dst'),
  },
  {
    kind: 'dnat4',
    family: 4,
    ipOpt: '--ip-dst',
    macOpt: '--to-dst',
    allowed: new Set(['-p', '-i', '--ip-dst', '-j', '--to-dst', '--dnat-target']),
    matches: (o) => proto(o, IPV4) && o.get('-j') === 'dnat' && o.has('--ip-dst') && o.has('--to-dst'),
  },
  {
    kind: 'dnat6',
    family: 6,
    ipOpt: '--ip6-dst',
    macOpt: '--to-dst',
    allowed: new Set(['-p', '-i', '--ip6-dst', '-j', '--to-dst', '--dnat-target']),
    matches: (o) => proto(o, IPV6) && o.get('-j') === 'dnat' && o.has('--ip6-dst') && o.has('--to-dst'),
  },
];
