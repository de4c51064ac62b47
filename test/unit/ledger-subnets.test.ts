// The ledger-subnet rule against what its writers record: the pod ranges a network falls back to when its IPAM has
// none to read (azure-ipam, the AKS case) come from records ADD wrote over a delegate's real result shape, never
// from hand-made CNI notation (the unit test before fed `10.240.0.40/16`, which no writer records).
import { describe, expect, it } from 'vitest';
import { parseResult } from '../../src/cni/result.js';
import { parseNetConf } from '../../src/cni/config.js';
import { cmdAdd } from '../../src/verbs/add.js';
import { networkPodRanges } from '../../src/pods/ranges.js';
import { refusal, type NodeFacts } from '../../src/residue/cleanable.js';
import { ledgerSubnets } from '../../src/ledger/subnets.js';
import { chainedConf } from '../support/doubles/verb-context.js';
import { fakes, verbContext } from '../support/doubles/verb-context.js';

// azure-ipam's result as CNS hands it out: the subnet's prefix length, no gateway, no routes (docs/testing.md).
const azureIpamResult = () =>
  parseResult({ cniVersion: '1.0.0', ips: [{ address: '10.240.0.32/16' }, { address: 'fd00:10:240::20/64' }] }, 'azure-ipam');

const node: NodeFacts = { ips: new Map([['10.240.0.5', 'azure0']]), macs: new Map(), gateways: new Map() };

describe("the ledger's subnets, from ADD's records", () => {
  // cilium-cni with the shim in its IPAM slot, delegating to azure-ipam: nothing readable in any IPAM config.
  const list = {
    cniVersion: '1.0.0',
    name: 'unit',
    plugins: [
      {
        type: 'cilium-cni',
        ipam: {
          type: 'ipam-shim',
          stateDir: '/nonexistent',
          residue: { ebtables: false, neigh: false },
          ipv6ProbeRewrite: 'off',
          delegate: { type: 'azure-ipam' },
        },
      },
    ],
  };
  const raw = { cniVersion: list.cniVersion, name: list.name, ...list.plugins[0] };

  it('an IPAM-slot ADD over azure-ipam records the subnet its addresses were handed out in', async () => {
    const f = fakes({ delegate: { type: 'azure-ipam', add: azureIpamResult } });
    await cmdAdd(verbContext('ADD', raw, f));
    const { records } = await f.ledger.list();
    const conf = parseNetConf(raw);
    const ranges = networkPodRanges({ conf, shim: { list, index: 0 } }, records);
    expect(ranges.ranges.map((r) => r.text)).toEqual(['10.240.0.0/16', 'fd00:10:240::/64']);
    // An unseen pod's address in that subnet may be cleaned; one outside it may not.
    expect(refusal('10.240.0.77', node, ranges)).toBeUndefined();
    expect(refusal('10.241.0.77', node, ranges)?.kind).toBe('outside-ranges');
  });

  it("chained after cilium-cni (its prevResult's /32): the record names no wider subnet than the address", async () => {
    const prev = { cniVersion: '1.0.0', interfaces: [{ name: 'lxc1' }], ips: [{ address: '10.240.0.32/32' }] };
    const f = fakes();
    await cmdAdd(verbContext('ADD', chainedConf(prev), f));
    const { records } = await f.ledger.list();
    expect(records[0]?.subnets).toEqual(['10.240.0.32/32']);
    expect(ledgerSubnets(records).map((c) => c.text)).toEqual(['10.240.0.32/32']);
  });

  it("a record without subnets (an older shim's) names none; text that is no CIDR is skipped", () => {
    expect(ledgerSubnets([{}, { subnets: ['10.0.0.0/24', 'x/3', '10.0.0.9/99', '10.0.0.7/24'] }]).map((c) => c.text)).toEqual(['10.0.0.0/24']);
  });
});
