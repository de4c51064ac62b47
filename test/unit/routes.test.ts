// Fixtures in test/fixtures/routes/ are recorded `ip -j -4|-6 route show table all` output (iproute2 6.1):
// host-*.json from the test machine itself, node-*.json from a netns set up as a node with an uplink `eth0`
// (10.240.0.5/16, default via 10.240.0.1 / fd00:240::1) and a local device `veth1`, plus: a pod-CIDR route to
// another node (10.224.0.0/24 via 10.240.0.7 dev eth0), 10.224.1.0/24 via veth1, 10.0.0.0/8 dev veth1,
// blackhole/unreachable/prohibit 10.225–227/16, 10.228/16 in table 100, a multipath 10.229/16 (eth0 + veth1),
// throw 10.230/16 table 100, host route 10.231.0.5 via the default gateway, 10.232/16 via inet6 (RFC 5549),
// 169.254/16 dev veth1, 192.168.7.0/24 via veth1; IPv6 fd00:224::/64 via veth1, blackhole fd00:225::/64,
// fd00:226::/64 via fd00:240::9 (another host), fd00:227::/64 via the default gateway, fd00:228::/64 table 100,
// ff05::/16 table 100.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ToolError } from '../../src/cni/errors.js';
import { parseRuleTables, listRoutes, parseRoutes } from '../../src/effects/routes.js';
import { defaultUplink } from '../../src/net/uplink.js';
import type { Route } from '../../src/net/route.js';
import { findCapturingRoutes, routeText, uplinkGateways } from '../../src/reserved/capture.js';
import { runElsewhere, type RunResult } from '../../src/effects/exec.js';
import { parseCidrs } from '../../src/net/cidr.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/routes/${name}`, import.meta.url), 'utf8');
const node: Route[] = [...parseRoutes(fixture('node-v4.json'), 4), ...parseRoutes(fixture('node-v6.json'), 6)];
const host: Route[] = [...parseRoutes(fixture('host-v4.json'), 4), ...parseRoutes(fixture('host-v6.json'), 6)];

function capture(routes: Route[], reserved: string[], uplink = 'eth0', uplinkGws?: string[]) {
  const opts = uplinkGws ? { uplink, uplinkGateways: uplinkGws } : { uplink };
  return findCapturingRoutes(routes, parseCidrs(reserved), opts).map((f) => ({
    text: f.text,
    reserved: f.reserved,
    overlap: f.overlap,
    reason: f.reason,
  }));
}

describe('parseRoutes', () => {
  it('normalises recorded ip -j output', () => {
    expect(node.find((r) => r.dst === '10.229.0.0/16')).toEqual({
      family: 4,
      type: 'unicast',
      dst: '10.229.0.0/16',
      table: 'main',
      flags: ['linkdown'],
      nexthops: [
        { gateway: '10.240.0.1', dev: 'eth0' },
        { gateway: '10.99.0.2', dev: 'veth1' },
      ],
    });
    expect(node.find((r) => r.dst === '10.232.0.0/16')).toMatchObject({ gateway: 'fd00:99::2', dev: 'veth1' });
    expect(node.find((r) => r.dst === '10.228.0.0/16')).toMatchObject({ table: '100', gateway: '10.99.0.2' });
    expect(node.find((r) => r.dst === 'fd00:225::/64')).toMatchObject({ family: 6, type: 'blackhole', dev: 'lo', metric: 1024 });
    expect(host.filter((r) => r.family === 6).every((r) => r.dst.includes(':') || r.dst === 'default')).toBe(true);
    expect(parseRoutes('', 4)).toEqual([]);
    expect(parseRoutes('[]\n', 6)).toEqual([]);
    expect(() => parseRoutes('{}', 4)).toThrow(/JSON array/);
  });

  it('renders routes in ip route syntax', () => {
    const text = (dst: string) => routeText(node.find((r) => r.dst === dst)!);
    expect(text('10.224.0.0/24')).toBe('10.224.0.0/24 via 10.240.0.7 dev eth0');
    expect(text('10.0.0.0/8')).toBe('10.0.0.0/8 dev veth1 proto static metric 100');
    expect(text('10.225.0.0/16')).toBe('blackhole 10.225.0.0/16');
    expect(text('fd00:225::/64')).toBe('blackhole fd00:225::/64 metric 1024');
    expect(text('10.228.0.0/16')).toBe('10.228.0.0/16 via 10.99.0.2 dev veth1 table 100');
    expect(text('10.232.0.0/16')).toBe('10.232.0.0/16 via inet6 fd00:99::2 dev veth1');
    expect(text('10.229.0.0/16')).toBe('10.229.0.0/16 nexthop via 10.240.0.1 dev eth0 nexthop via 10.99.0.2 dev veth1');
  });

  it('finds the uplink and its gateways', () => {
    expect(defaultUplink(node)).toBe('eth0');
    expect(defaultUplink(host)).toBe('eth0');
    expect(uplinkGateways(node, 'eth0')).toEqual(['10.240.0.1', 'fd00:240::1']);
    expect(uplinkGateways(node, 'veth1')).toEqual([]);
    expect(defaultUplink([])).toBeUndefined();
  });
});

describe('findCapturingRoutes', () => {
  it('seed case: a pod-CIDR route to another node over a firewall subnet (the broader 10.0.0.0/8 never sees it: shadowed)', () => {
    expect(capture(node, ['10.224.0.0/24'])).toEqual([
      { text: '10.224.0.0/24 via 10.240.0.7 dev eth0', reserved: '10.224.0.0/24', overlap: 'full', reason: 'other-gateway' },
    ]);
  });

  it('a broad route shadowed by a more specific one that captures too is not reported (its fix, adding that route, would fail)', () => {
    const found = findCapturingRoutes(node, parseCidrs(['10.224.0.0/24']), { uplink: 'eth0' });
    expect(found.map((f) => f.text)).toEqual(['10.224.0.0/24 via 10.240.0.7 dev eth0']);
    expect(found.some((f) => f.fix.includes('ip route add 10.224.0.0/24'))).toBe(false);
  });

  it('a route in a table no ip rule looks up is never used, so never reported; an l3mdev rule makes every table count', () => {
    const reserved = ['10.228.0.0/16', 'fd00:228::/64'];
    const inTable100 = (f: { text: string }) => f.text.includes('table 100');
    expect(capture(node, reserved).filter(inTable100)).toHaveLength(2);
    const mainOnly = {
      4: parseRuleTables(
        '[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]',
      ),
      6: parseRuleTables('[{"priority":32766,"src":"all","table":"main"}]'),
    };
    expect(findCapturingRoutes(node, parseCidrs(reserved), { uplink: 'eth0', activeTables: mainOnly }).filter(inTable100)).toEqual([]);
    const used = {
      4: parseRuleTables('[{"priority":100,"src":"10.1.0.0/16","table":"100"},{"priority":32766,"src":"all","table":"main"}]'),
      6: mainOnly[6],
    };
    expect(
      findCapturingRoutes(node, parseCidrs(reserved), { uplink: 'eth0', activeTables: used })
        .filter(inTable100)
        .map((f) => f.reserved),
    ).toEqual(['10.228.0.0/16']);
    expect(parseRuleTables('[{"priority":1000,"src":"all","l3mdev":null}]')).toBe('all');
  });

  it('reports partial captures of a larger reserved CIDR', () => {
    expect(capture(node, ['10.224.0.0/16'])).toEqual([
      { text: '10.0.0.0/8 dev veth1 proto static metric 100', reserved: '10.224.0.0/16', overlap: 'full', reason: 'other-device' },
      { text: '10.224.0.0/24 via 10.240.0.7 dev eth0', reserved: '10.224.0.0/16', overlap: 'partial', reason: 'other-gateway' },
      { text: '10.224.1.0/24 via 10.99.0.2 dev veth1', reserved: '10.224.0.0/16', overlap: 'partial', reason: 'other-device' },
    ]);
  });

  it('reports blackhole/unreachable/prohibit, other tables, multipath and RFC 5549 nexthops; skips throw', () => {
    const found = capture(
      node.filter((r) => r.dst !== '10.0.0.0/8'),
      ['10.225.0.0/16', '10.226.0.0/16', '10.227.0.0/17', '10.228.0.0/16', '10.229.0.0/16', '10.230.0.0/16', '10.232.0.0/16'],
    );
    expect(found).toEqual([
      { text: '10.228.0.0/16 via 10.99.0.2 dev veth1 table 100', reserved: '10.228.0.0/16', overlap: 'full', reason: 'other-device' },
      { text: 'blackhole 10.225.0.0/16', reserved: '10.225.0.0/16', overlap: 'full', reason: 'blackhole' },
      { text: 'unreachable 10.226.0.0/16', reserved: '10.226.0.0/16', overlap: 'full', reason: 'unreachable' },
      { text: 'prohibit 10.227.0.0/16', reserved: '10.227.0.0/17', overlap: 'full', reason: 'prohibit' },
      {
        text: '10.229.0.0/16 nexthop via 10.240.0.1 dev eth0 nexthop via 10.99.0.2 dev veth1',
        reserved: '10.229.0.0/16',
        overlap: 'full',
        reason: 'other-device',
      },
      { text: '10.232.0.0/16 via inet6 fd00:99::2 dev veth1', reserved: '10.232.0.0/16', overlap: 'full', reason: 'other-device' },
    ]);
  });

  it('IPv6: other device, blackhole, another host on the uplink; not the default gateway; skips multicast', () => {
    expect(capture(node, ['fd00:224::/30', 'fd00:228::/64', 'ff05::/16'])).toEqual([
      { text: 'fd00:228::/64 dev veth1 table 100 metric 1024', reserved: 'fd00:228::/64', overlap: 'full', reason: 'other-device' },
      { text: 'fd00:224::/64 via fd00:99::2 dev veth1 metric 1024', reserved: 'fd00:224::/30', overlap: 'partial', reason: 'other-device' },
      { text: 'blackhole fd00:225::/64 metric 1024', reserved: 'fd00:224::/30', overlap: 'partial', reason: 'blackhole' },
      { text: 'fd00:226::/64 via fd00:240::9 dev eth0 metric 1024', reserved: 'fd00:224::/30', overlap: 'partial', reason: 'other-gateway' },
    ]);
  });

  it('a broad route is not reported where a more specific uplink route of its table covers the reserved CIDR', () => {
    expect(capture(node, ['10.240.0.0/24'])).toEqual([]); // 10.240.0.0/16 dev eth0 wins over 10.0.0.0/8
    expect(capture(node, ['10.231.0.5'])).toEqual([]); // host route via the default gateway
    expect(capture(node, ['10.231.0.0/24'])).toEqual([
      { text: '10.0.0.0/8 dev veth1 proto static metric 100', reserved: '10.231.0.0/24', overlap: 'full', reason: 'other-device' },
    ]);
  });

  it('skips default, local-table, link-local and multicast routes, and unrelated reserved CIDRs', () => {
    expect(capture(node, ['169.254.169.254', 'fe80::/64', '127.0.0.0/8', '172.16.0.0/12', 'ff02::1'])).toEqual([]);
    expect(capture(host, ['192.0.2.0/24', 'fd00::/64', '203.0.113.0/24'])).toEqual([]);
  });

  it('uses the given uplink gateways; with none known, routes via the uplink are trusted', () => {
    // 10.240.0.7 declared a VNet gateway: its /24 route is fine and, being more specific, shadows 10.0.0.0/8
    expect(capture(node, ['10.224.0.0/24'], 'eth0', ['10.240.0.7'])).toEqual([]);
    expect(capture(node, ['10.224.0.0/16'], 'eth0', ['10.240.0.7']).map((f) => f.text)).toEqual([
      '10.0.0.0/8 dev veth1 proto static metric 100',
      '10.224.1.0/24 via 10.99.0.2 dev veth1',
    ]);
    const noDefault = node.filter((r) => r.dst !== 'default');
    expect(capture(noDefault, ['10.224.0.0/16']).map((f) => f.text)).toEqual([
      '10.0.0.0/8 dev veth1 proto static metric 100',
      '10.224.1.0/24 via 10.99.0.2 dev veth1',
    ]);
    // with veth1 as the uplink, routes via eth0 are the capturing ones
    expect(capture(node, ['10.224.0.0/16'], 'veth1').map((f) => f.text)).toEqual(['10.224.0.0/24 via 10.240.0.7 dev eth0']);
  });

  it('gives a one-line fix: delete a route inside the reserved subnet, or add a more specific one', () => {
    const found = findCapturingRoutes(node, parseCidrs(['10.224.0.0/24', '10.225.0.0/16', 'fd00:224::/30']), { uplink: 'eth0' });
    const fix = (text: string, reserved: string) => found.find((f) => f.text === text && f.reserved === reserved)!.fix;
    expect(fix('10.224.0.0/24 via 10.240.0.7 dev eth0', '10.224.0.0/24')).toBe(
      '10.224.0.0/24 lies in reserved 10.224.0.0/24 and is routed to another host on the uplink: take it out of the pod pool (see `ipam-shim plan`), then `ip route del 10.224.0.0/24`',
    );
    const broad = findCapturingRoutes(node, parseCidrs(['10.224.0.0/16']), { uplink: 'eth0' }).find((f) => f.text.startsWith('10.0.0.0/8'))!;
    expect(broad.fix).toBe(
      'add a more specific route for the reserved subnet: `ip route add 10.224.0.0/16 via 10.240.0.1 dev eth0`, or narrow 10.0.0.0/8',
    );
    expect(fix('blackhole 10.225.0.0/16', '10.225.0.0/16')).toBe(
      'traffic to 10.225.0.0/16 (reserved 10.225.0.0/16) is dropped here: `ip route del blackhole 10.225.0.0/16` if nothing needs it',
    );
    expect(fix('fd00:224::/64 via fd00:99::2 dev veth1 metric 1024', 'fd00:224::/30')).toMatch(/`ip -6 route del fd00:224::\/64`$/);
    for (const f of found) expect(f.fix).not.toContain('\n');
  });
});

describe('listRoutes', () => {
  const result = (stdout: string, exitCode = 0, stderr = ''): RunResult => ({ stdout, stderr, exitCode, timedOut: false, notFound: false });

  it('reads both families with explicit -4/-6, concurrently', async () => {
    const calls: string[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const run = runElsewhere(async (file, args) => {
      calls.push([file, ...args].join(' '));
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
      return result(fixture(args.includes('-6') ? 'node-v6.json' : 'node-v4.json'));
    });
    const routes = await listRoutes(run);
    expect(calls.sort()).toEqual(['ip -j -4 route show table all', 'ip -j -6 route show table all']);
    expect(maxInFlight).toBe(2);
    expect(routes).toEqual(node);
  });

  it('tolerates a kernel without IPv6 and reports other failures', async () => {
    const noV6 = runElsewhere(async (_f, args) =>
      args.includes('-6') ? result('', 2, 'RTNETLINK answers: Address family not supported by protocol\n') : result(fixture('host-v4.json')),
    );
    expect((await listRoutes(noV6)).every((r) => r.family === 4)).toBe(true);
    const broken = runElsewhere(async (_f, args) => (args.includes('-6') ? result('', 1, 'Error: something else\n') : result('[]')));
    await expect(listRoutes(broken)).rejects.toBeInstanceOf(ToolError);
  });
});
