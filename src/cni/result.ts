// Results between spec versions. Inside the shim a result is 1.x-shaped; 0.3.x/0.4.0 add `ips[].version`.
import * as z from './zod.js';
import { atLeast } from './versions.js';
import { CniError, ErrorCode, formatIssues } from './errors.js';

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
type IpConfig = z.infer<typeof IpConfigSchema>;

/** Parses a result (a delegate's stdout or a prevResult), reporting problems as code 6. */
export function parseResult(raw: unknown, what: string): Result {
  const r = ResultSchema.safeParse(raw);
  if (!r.success) throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: formatIssues(r.error.issues) });
  return r.data;
}

/** The bare address of an ips[] entry ("10.0.0.5/24" → "10.0.0.5"). */
function addressOf(ip: IpConfig): string {
  return ip.address.split('/')[0] ?? ip.address;
}

const familyOf = (address: string): '4' | '6' => (address.includes(':') ? '6' : '4');

/** Converts a result to `version`: adds or drops `ips[].version`; everything else passes through untouched. */
export function convertResult(result: Result, version: string): Result {
  const ips = result.ips?.map((ip) => {
    const { version: _drop, ...rest } = ip;
    return atLeast(version, '1.0.0') ? rest : { ...rest, version: familyOf(ip.address) };
  });
  const out: Result = { ...result, cniVersion: version };
  if (ips) out.ips = ips;
  return out;
}

/** Every bare address a result hands out, each once (an address listed twice is still one allocation). */
export function resultAddresses(result: Result): string[] {
  return [...new Set((result.ips ?? []).map(addressOf))];
}

/** PURE. Host-side interfaces a CNI result names: the ones without a `sandbox`. */
export function resultHostDevices(result: Pick<Result, 'interfaces'> | undefined): string[] {
  return (result?.interfaces ?? []).filter((i) => !i.sandbox).map((i) => i.name);
}
