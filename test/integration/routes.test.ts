// Real routing tables in throwaway namespaces: a "node" with an uplink (up0 → netns vnet, default via the VNet
// gateway) and a local device (vx0 → netns peer). listRoutes(runInNetns(node)) + findCapturingRoutes must find
// exactly the planted capturing route and nothing among the clean ones.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInNetns } from '../../src/effects/exec.js';
import { listRoutes } from '../../src/effects/routes.js';
import { defaultUplink } from '../../src/net/uplink.js';
import { findCapturingRoutes } from '../../src/reserved/capture.js';
import { parseCidrs } from '../../src/net/cidr.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { routedNode } from '../support/net/routed-node.js';

const root = rootOrSkip();

describe.skipIf(!root)('routes capturing reserved CIDRs (real netns)', () => {
  let net: TestNet;
  let node: string;

  beforeEach(async () => {
    net = new TestNet();
    node = await routedNode(net);
    const ip = (...args: string[]) => inNs(node, 'ip', args);
    // clean: unrelated subnet via the local device; reserved-adjacent and reserved subnets via the VNet gateway
    await ip('route', 'add', '192.168.50.0/24', 'via', '10.99.0.2', 'dev', 'vx0');
    await ip('route', 'add', '10.225.0.0/16', 'via', '10.240.0.1', 'dev', 'up0');
    await ip('route', 'add', '10.224.0.0/24', 'via', '10.240.0.1', 'dev', 'up0', 'table', '100');
    await ip('-6', 'route', 'add', 'fd00:225::/64', 'via', 'fd00:99::2', 'dev', 'vx0');
  });

  afterEach(async () => {
    await net.cleanup();
  });

  it('finds nothing on a clean node', async () => {
    const routes = await listRoutes(runInNetns(node));
    expect(routes.some((r) => r.family === 4 && r.table === 'local')).toBe(true);
    expect(routes.some((r) => r.family === 6 && r.dst === 'default')).toBe(true);
    expect(defaultUplink(routes)).toBe('up0');
    expect(findCapturingRoutes(routes, parseCidrs(['10.224.0.0/24', 'fd00:224::/64']), { uplink: 'up0' })).toEqual([]);
  });

  it('finds exactly the planted IPv4 pod-CIDR route over the reserved subnet', async () => {
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/16', 'via', '10.99.0.2', 'dev', 'vx0']);
    const routes = await listRoutes(runInNetns(node));
    const found = findCapturingRoutes(routes, parseCidrs(['10.224.0.0/24', 'fd00:224::/64']), { uplink: 'up0' });
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      text: '10.224.0.0/16 via 10.99.0.2 dev vx0',
      reserved: '10.224.0.0/24',
      overlap: 'full',
      reason: 'other-device',
      route: { family: 4, dst: '10.224.0.0/16', gateway: '10.99.0.2', dev: 'vx0', table: 'main' },
    });
    expect(found[0]!.fix).toContain('ip route add 10.224.0.0/24 via 10.240.0.1 dev up0');
  });

  it('finds exactly the planted IPv6 route to another host on the uplink', async () => {
    await inNs(node, 'ip', ['-6', 'route', 'add', 'fd00:224::/64', 'via', 'fd00:240::7', 'dev', 'up0']);
    const found = findCapturingRoutes(await listRoutes(runInNetns(node)), parseCidrs(['10.224.0.0/24', 'fd00:224::/48']), { uplink: 'up0' });
    expect(found.map((f) => [f.text, f.reserved, f.overlap, f.reason])).toEqual([
      ['fd00:224::/64 via fd00:240::7 dev up0 metric 1024', 'fd00:224::/48', 'partial', 'other-gateway'],
    ]);
  });
});
