// The addresses a result hands out, as the verbs take them (the fixes' loop over them: src/fixes/address-steps.ts).
import { CniError, ErrorCode } from '../cni/errors.js';
import { addressProblem, canonicalIp } from '../net/ip.js';
import type { Result } from '../cni/result.js';

/**
 * The addresses a result hands out, each once, in canonical text (dotted quad; RFC 5952 for IPv6): the ledger's
 * index and the residue and GC matches compare text, so `FD00:0::5` and `fd00::5` must be one address. An address
 * the shim does not take is refused here, at the boundary, by src/net/ip.ts's rule: in a prevResult, one that is
 * not an IP is 6 (it cannot be decoded) and an IPv4-mapped one 7; in a delegate's result (Delegate.add checked
 * it already) 101.
 */
export function resultIps(result: Result, origin: 'prevResult' | 'delegate'): string[] {
  for (const ip of result.ips ?? []) {
    const problem = addressProblem(ip.address);
    if (!problem) continue;
    const code =
      origin === 'delegate' ? ErrorCode.DelegateFailed : problem.kind === 'mapped' ? ErrorCode.InvalidNetworkConfig : ErrorCode.DecodingFailure;
    const what = problem.kind === 'mapped' ? 'an IPv4-mapped IPv6 address' : 'an address that is not an IP';
    throw new CniError(code, `${origin} holds ${what}: ${JSON.stringify(ip.address)}`, { details: problem.message });
  }
  return [...new Set((result.ips ?? []).map((ip) => canonicalIp(ip.address)))];
}
