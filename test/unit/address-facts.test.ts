// One owner per address fact, every caller asked the same tricky inputs (as test/e2e/uplink.test.ts does for the
// uplink): the address of `address[/prefix]` (src/net/ip.ts parseAddressOf) and a result's canonical addresses
// (src/cni/result.ts resultIps / canonicalAddresses). A second rule in any caller makes its column differ.
import { FIXES } from '../../src/fix-list/registry.js';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { parseNetConf } from '../../src/cni/config.js';
import { parseResult, resultIps } from '../../src/cni/result.js';
import { addressOf, canonicalIp } from '../../src/net/ip.js';
import { parseCidr } from '../../src/net/cidr.js';
import { findReservedHit } from '../../src/reserved/ranges.js';
import { mergeTargets } from '../../src/residue/report.js';
import { hostRouteDevices } from '../../src/residue/own.js';
import { cachedAttachments } from '../../src/gc/from-cache.js';
import { allocateAgentIp } from '../../src/agent-ips/allocate.js';
import { cmdAdd } from '../../src/verbs/add.js';
import { cmdCheck } from '../../src/verbs/check.js';
import { silentLogger } from '../../src/log.js';
import { chainedConf, fakes, ipamConf, verbContext } from '../support/doubles/verb-context.js';
import type { Result } from '../../src/cni/result.js';
import type { Route } from '../../src/net/route.js';

/** Spellings of one address each, with the canonical text every caller must name. */
const SPELLINGS: Array<[string, string]> = [
  ['10.0.0.5/24', '10.0.0.5'],
  ['10.0.0.5', '10.0.0.5'],
  ['10.0.0.5/32', '10.0.0.5'],
  ['FD00:0::5/64', 'fd00::5'],
  ['fd00:0000:0000:0000:0000:0000:0000:0005/128', 'fd00::5'],
  ['2001:DB8:0:0:1:0:0:1/64', '2001:db8::1:0:0:1'],
];

const everyAddress = [parseCidr('0.0.0.0/0'), parseCidr('::/0')];

describe('the address of address[/prefix]: one rule (src/net/ip.ts parseAddressOf), every caller', () => {
  it.each(SPELLINGS)('%s → %s everywhere', async (text, canonical) => {
    const v6 = canonical.includes(':');
    const route: Route = {
      family: v6 ? 6 : 4,
      dst: `${text.split('/')[0]}/${v6 ? 128 : 32}`,
      dev: 'veth1',
      type: 'unicast',
      table: 'main',
      flags: [],
    };
    expect({
      canonicalIp: canonicalIp(text),
      addressOf: addressOf(text),
      reserved: findReservedHit(text, everyAddress)?.ip,
      residueTargets: mergeTargets([{ ip: text, attachment: 'c1/eth0' }], [])[0]?.ip,
      residueNamed: mergeTargets([], [text])[0]?.ip,
      hostRoutes: [...hostRouteDevices([route]).keys()][0],
      resultIps: resultIps({ ips: [{ address: text }] }, 'prevResult')[0],
    }).toEqual({
      canonicalIp: canonical,
      addressOf: canonical,
      reserved: canonical,
      residueTargets: canonical,
      residueNamed: canonical,
      hostRoutes: canonical,
      resultIps: canonical,
    });
  });
  it('what is not an address is one to none of them', () => {
    for (const text of ['10.0.0.256/24', 'banana', '::ffff:10.0.0.5/120', '']) {
      expect(addressOf(text), text).toBeUndefined();
      expect(() => canonicalIp(text), text).toThrow();
      expect(() => findReservedHit(text, everyAddress), text).toThrow();
      expect(() => mergeTargets([], [text]), text).toThrow(TypeError);
    }
  });
});

/** A result listing one address twice in two spellings, and a second family. */
const TWICE = ['FD00:0::5/64', 'fd00::5/64', '10.0.0.5/24', '10.0.0.5/16'];
const ONCE = ['fd00::5', '10.0.0.5'];

describe("a result's canonical addresses: one rule (src/cni/result.ts), every caller", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const result = (): Result => parseResult({ cniVersion: '1.0.0', ips: TWICE.map((address) => ({ address })) }, 'test result');

  it('ADD (delegate and prevResult), CHECK, agent-ip allocate and the runtime cache name the same addresses', async () => {
    // ADD in the IPAM slot: the ledger's record.
    const ipam = fakes({ delegate: { add: () => result() } });
    await cmdAdd(verbContext('ADD', ipamConf(), ipam));
    const add = (await ipam.ledger.get({ containerID: 'c1', ifname: 'eth0' }))?.ips;

    // Chained ADD: the runtime's prevResult.
    const chained = chainedConf(result());
    const chainedFakes = fakes();
    await cmdAdd(verbContext('ADD', chained, chainedFakes));
    const prev = (await chainedFakes.ledger.get({ containerID: 'c1', ifname: 'eth0' }))?.ips;

    // CHECK compares the prevResult's addresses with the ledger's: equal sets pass.
    await expect(cmdCheck(verbContext('CHECK', chained, chainedFakes))).resolves.toBeUndefined();

    // agent-ip allocate: the ledger's record and the answer.
    const agent = fakes({ run: () => '', delegate: { add: () => result() } });
    await allocateAgentIp(
      { conf: parseNetConf(ipamConf()), ledger: agent.ledger, delegate: agent.delegate, run: agent.run, log: silentLogger, fixes: FIXES },
      'n1',
      'dual',
    );
    const allocated = (await agent.ledger.get({ containerID: 'cilium-agent-n1', ifname: 'eth0' }))?.ips;

    // The runtime's cache entry for the same result (GC and the pods view read it).
    const root = await mkdtemp(join(tmpdir(), 'address-facts-'));
    dirs.push(root);
    await mkdir(join(root, 'results'), { recursive: true });
    const entry = { kind: 'cniCacheV1', containerId: 'c1', ifName: 'eth0', networkName: 'net', config: 'e30=', result: result() };
    await writeFile(join(root, 'results', 'net-c1-eth0'), JSON.stringify(entry));
    const cached = (await cachedAttachments(root, 'net')).pods[0]?.ips;

    expect({ add, prev, allocated, cached }).toEqual({ add: ONCE, prev: ONCE, allocated: ONCE, cached: ONCE });
  });

  it("a delegate's bad address is refused once, by one rule: 101 naming the delegate", () => {
    let err: unknown;
    try {
      resultIps({ ips: [{ address: '10.0.0.5/24' }, { address: 'banana/24' }] }, { delegate: 'fake-ipam', output: () => '{…}' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CniError);
    expect(err).toMatchObject({ code: ErrorCode.DelegateFailed, msg: 'delegate fake-ipam ADD returned an address that is not an IP: "banana/24"' });
    expect((err as CniError).details).toMatch(/; the result: \{…\}$/);
  });
  it('a prevResult: not an IP is 6, a mapped one 7', () => {
    const code = (address: string) => {
      try {
        resultIps({ ips: [{ address }] }, 'prevResult');
        return 0;
      } catch (e) {
        return (e as CniError).code;
      }
    };
    expect(code('banana')).toBe(ErrorCode.DecodingFailure);
    expect(code('::ffff:10.0.0.5/120')).toBe(ErrorCode.InvalidNetworkConfig);
  });
});
