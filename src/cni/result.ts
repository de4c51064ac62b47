// Results between spec versions. Inside the shim a result is 1.x-shaped; 0.3.x/0.4.0 add `ips[].version`.
import * as z from './zod.js';
import { atLeast } from './versions.js';
import { CniError, ErrorCode, formatIssues } from './errors.js';
import { addressProblem, canonicalIp, familyOf } from '../net/ip.js';
import { parseCidr } from '../net/cidr.js';

const IpConfigSchema = z.looseObject({
  address: z.string(),
  gateway: z.optional(z.string()),
  interface: z.optional(z.int().check(z.nonnegative())),
  version: z.optional(z.enum(['4', '6'])),
});

const InterfaceSchema = z.looseObject({ name: z.string(), mac: z.optional(z.string()), sandbox: z.optional(z.string()) });

const ResultSchema = z.looseObject({
  cniVersion: z.optional(z.string()),
  interfaces: z.optional(z.array(InterfaceSchema)),
  ips: z.optional(z.array(IpConfigSchema)),
  routes: z.optional(z.array(z.looseObject({ dst: z.string() }))),
  dns: z.optional(z.looseObject({})),
});

export type Result = z.infer<typeof ResultSchema>;

/** Parses a result (a delegate's stdout or a prevResult), reporting problems as code 6. */
export function parseResult(raw: unknown, what: string): Result {
  const r = ResultSchema.safeParse(raw);
  if (!r.success) throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: formatIssues(r.error.issues) });
  return r.data;
}

/** Converts a result to `version`: adds or drops `ips[].version`; everything else passes through untouched. */
export function convertResult(result: Result, version: string): Result {
  const ips = result.ips?.map((ip) => {
    const { version: _drop, ...rest } = ip;
    return atLeast(version, '1.0.0') ? rest : { ...rest, version: String(familyOf(ip.address)) as '4' | '6' };
  });
  const out: Result = { ...result, cniVersion: version };
  if (ips) out.ips = ips;
  return out;
}

/** The first of `texts` (`address[/prefix]`) that is not an address the shim takes (src/net/ip.ts's rule), or undefined. */
export function badAddress(texts: readonly string[]): { address: string; kind: 'invalid' | 'mapped'; message: string } | undefined {
  for (const address of texts) {
    const problem = addressProblem(address);
    if (problem) return { address, ...problem };
  }
  return undefined;
}

/**
 * THE canonical addresses of a result's texts (its `ips[].address`; a cached 0.2.0 result's `ip4`/`ip6` too): each
 * once, in order, in canonical text (src/net/ip.ts canonicalIp: the prefix dropped; RFC 5952). Deduplicated after
 * canonicalising: `FD00:0::5/64` and `fd00::5/64` are one allocation. Callers refuse badAddress first; throws on one.
 */
export function canonicalAddresses(texts: readonly string[]): string[] {
  return [...new Set(texts.map(canonicalIp))];
}

/** Where a result came from, for the refusal's code and message: a prevResult, or delegate `type`'s ADD (`output`: an excerpt of it, made only for a refusal). */
export type ResultOrigin = 'prevResult' | { delegate: string; output?: () => string };

/**
 * THE refusal of a result holding an address the shim does not take, at the boundary: in a prevResult, one that is
 * not an IP is 6 (it cannot be decoded) and an IPv4-mapped one 7; in a delegate's result 101 (the delegate's fault).
 */
export function refuseBadAddresses(result: Pick<Result, 'ips'>, origin: ResultOrigin): void {
  const bad = badAddress((result.ips ?? []).map((ip) => ip.address));
  if (!bad) return;
  const what = bad.kind === 'mapped' ? 'an IPv4-mapped IPv6 address' : 'an address that is not an IP';
  if (origin === 'prevResult') {
    const code = bad.kind === 'mapped' ? ErrorCode.InvalidNetworkConfig : ErrorCode.DecodingFailure;
    throw new CniError(code, `prevResult holds ${what}: ${JSON.stringify(bad.address)}`, { details: bad.message });
  }
  throw new CniError(ErrorCode.DelegateFailed, `delegate ${origin.delegate} ADD returned ${what}: ${JSON.stringify(bad.address)}`, {
    details: origin.output === undefined ? bad.message : `${bad.message}; the result: ${origin.output()}`,
  });
}

/**
 * The addresses a result hands out (ADD, CHECK, `agent-ip allocate`): refused at the boundary (refuseBadAddresses),
 * then canonicalAddresses.
 */
export function resultIps(result: Pick<Result, 'ips'>, origin: ResultOrigin): string[] {
  refuseBadAddresses(result, origin);
  return canonicalAddresses((result.ips ?? []).map((ip) => ip.address));
}

/**
 * PURE. The subnets a result's addresses were handed out in, as it gives them (CNI notation: `10.240.0.32/16` →
 * `10.240.0.0/16`; a bare address or a host prefix, as cilium-cni's /32, names no more than itself), canonical
 * CIDR text, each once. What a ledger record keeps for the network's fallback pod ranges (src/ledger/subnets.ts).
 * Callers refuse bad addresses first; one parseCidr still refuses is skipped.
 */
export function resultSubnets(result: Pick<Result, 'ips'>): string[] {
  const out = new Set<string>();
  for (const ip of result.ips ?? []) {
    try {
      out.add(parseCidr(ip.address).text);
    } catch {
      // refused at the boundary (refuseBadAddresses); nothing to record
    }
  }
  return [...out];
}

/** PURE. Host-side interfaces a CNI result names: the ones without a `sandbox`. */
export function resultHostDevices(result: Pick<Result, 'interfaces'> | undefined): string[] {
  return (result?.interfaces ?? []).filter((i) => !i.sandbox).map((i) => i.name);
}
