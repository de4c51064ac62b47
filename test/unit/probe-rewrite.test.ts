// The pure ruleset (src/probe-rewrite/ruleset.ts), fed output recorded from nft 1.0.6 / iproute2 6.1 on the verified
// probe topology (test/fixtures/nft/), plus the effect functions over a scripted Run to pin their tolerances.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CniError, ToolError, ErrorCode } from '../../src/cni/errors.js';
import { runElsewhere, type Run, type RunResult } from '../../src/effects/exec.js';
import { parseDefaultRouteDev } from '../../src/effects/uplink.js';
import { ensureProbeRewrite, listProbeTable, probeRewriteStatus, removeProbeRewrite, tableState } from '../../src/probe-rewrite/node.js';
import { parseBpfProbeHandler, parseProbeTable, probeCounters, probeRewriteRuleset, probeTableMatches } from '../../src/probe-rewrite/ruleset.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/nft/${name}`, import.meta.url), 'utf8');

describe('probeRewriteRuleset', () => {
  it('is AgentBaker’s table as one replace-the-table transaction', () => {
    expect(probeRewriteRuleset({ uplink: 'eth0' })).toBe(
      [
        'table ip6 azureSLBProbe',
        'delete table ip6 azureSLBProbe',
        'table ip6 azureSLBProbe {',
        '\tchain prerouting {',
        '\t\ttype filter hook prerouting priority -300; policy accept;',
        '\t\tiifname "eth0" icmpv6 type { nd-neighbor-solicit, nd-router-advert, nd-neighbor-advert } counter accept',
        '\t\tiifname "eth0" ip6 saddr fe80::1234:5678:9abc ip6 saddr set 2603:1062:0:1:fe80:1234:5678:9abc counter',
        '\t}',
        '\tchain postrouting {',
        '\t\ttype filter hook postrouting priority -300; policy accept;',
        '\t\toifname "eth0" ip6 daddr 2603:1062:0:1:fe80:1234:5678:9abc ip6 daddr set fe80::1234:5678:9abc counter',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('takes other addresses and writes them the way nft lists them', () => {
    const text = probeRewriteRuleset({ uplink: 'enP1s1.100', probeSource: 'FE80:0:0:0:0:0:0:42', probeGlobal: '2001:DB8:0:0::42' });
    expect(text).toContain('iifname "enP1s1.100" ip6 saddr fe80::42 ip6 saddr set 2001:db8::42 counter');
    expect(text).toContain('oifname "enP1s1.100" ip6 daddr 2001:db8::42 ip6 daddr set fe80::42 counter');
  });

  it.each([
    ['uplink', { uplink: 'eth0" accept; flush ruleset; #' }],
    ['uplink', { uplink: 'a-name-longer-than-15' }],
    ['uplink', { uplink: '..' }],
    ['probeSource', { uplink: 'eth0', probeSource: '10.0.0.1' }],
    ['probeSource', { uplink: 'eth0', probeSource: 'fe80::1%eth0' }],
    ['probeGlobal', { uplink: 'eth0', probeGlobal: '2603::1 counter' }],
  ])('rejects a bad %s with code 7 before anything reaches nft', (field, opts) => {
    const err = catchError(() => probeRewriteRuleset(opts));
    expect(err).toBeInstanceOf(CniError);
    expect((err as CniError).code).toBe(ErrorCode.InvalidNetworkConfig);
    expect((err as CniError).details).toMatch(new RegExp(`^${field}: `));
  });
});

describe('parsing recorded nft -j output', () => {
  const installed = parseProbeTable(fixture('list-table-after-probes.json'));

  it('recognises the table ensureProbeRewrite installed (counters and set order ignored)', () => {
    expect(probeTableMatches(installed, { uplink: 'eth0' })).toBe(true);
  });

  it('notices another uplink or another address', () => {
    expect(probeTableMatches(installed, { uplink: 'eth1' })).toBe(false);
    expect(probeTableMatches(installed, { uplink: 'eth0', probeGlobal: '2603:1062:0:1:fe80:1234:5678:9abd' })).toBe(false);
  });

  it('counts only the rewrite rules’ packets', () => {
    // The ND accept rule saw 1 packet / 64 bytes: not probe traffic.
    expect(probeCounters(installed)).toEqual({ prerouting: { packets: 6, bytes: 512 }, postrouting: { packets: 2, bytes: 208 } });
    expect(probeCounters(null)).toEqual({ prerouting: { packets: 0, bytes: 0 }, postrouting: { packets: 0, bytes: 0 } });
  });

  it('calls a table with a foreign chain priority, a duplicate rule and no postrouting drifted', () => {
    const drifted = parseProbeTable(fixture('list-table-drifted.json'));
    expect(drifted.chains.prerouting?.prio).toBe(-200);
    expect(drifted.rules).toHaveLength(2);
    expect(probeTableMatches(drifted, { uplink: 'eth0' })).toBe(false);
  });

  it('rejects output that is not nft JSON', () => {
    expect(() => parseProbeTable('{"tables": []}')).toThrow();
  });
});

describe('parsing recorded ip and tc output', () => {
  it('finds the default route’s device, or null', () => {
    expect(parseDefaultRouteDev(fixture('ip-6-route-default.json'))).toBe('eth0');
    expect(parseDefaultRouteDev(fixture('ip-6-route-default-none.json'))).toBeNull();
    expect(parseDefaultRouteDev('')).toBeNull();
    // Lowest metric wins; multipath routes name their devices per nexthop.
    const routes = [
      { dst: 'default', dev: 'eth9', metric: 2048 },
      { dst: 'default', metric: 100, nexthops: [{ gateway: 'fe80::1', dev: 'bond0' }] },
    ];
    expect(parseDefaultRouteDev(JSON.stringify(routes))).toBe('bond0');
  });

  it('sees a BPF probe handler only on clsact with a non-Cilium BPF ingress filter', () => {
    const [plain, clsact] = [fixture('tc-qdisc-plain.json'), fixture('tc-qdisc-clsact.json')];
    expect(parseBpfProbeHandler(plain, fixture('tc-filter-ingress-ebpf.json'))).toBe(false);
    expect(parseBpfProbeHandler(clsact, fixture('tc-filter-ingress-empty.json'))).toBe(false);
    expect(parseBpfProbeHandler(clsact, fixture('tc-filter-ingress-ebpf.json'))).toBe(true);
    expect(parseBpfProbeHandler(clsact, fixture('tc-filter-ingress-cbpf.json'))).toBe(true);
    expect(parseBpfProbeHandler(clsact, fixture('tc-filter-ingress-cilium.json'))).toBe(false);
  });
});

describe('effects over a scripted Run', () => {
  const ok = (stdout = ''): Partial<RunResult> => ({ stdout, exitCode: 0 });
  const fail = (stderr: string, exitCode = 1): Partial<RunResult> => ({ stderr, exitCode });
  const missing: Partial<RunResult> = { exitCode: undefined, notFound: true };

  /** A Run answering from `script` (keyed by "file args…"), recording every call. */
  function scripted(script: Record<string, Partial<RunResult>>) {
    const calls: string[] = [];
    const run = runElsewhere(async (file, args, opts) => {
      const key = [file, ...args].join(' ');
      calls.push(key);
      const answer = script[key];
      if (!answer) throw new Error(`unscripted call: ${key}`);
      expect(opts?.check).toBe(false); // failures are interpreted here, not thrown by run()
      return { stdout: '', stderr: '', exitCode: 0, timedOut: false, notFound: false, ...answer };
    });
    return { run, calls };
  }
  const LIST = 'nft -j list table ip6 azureSLBProbe';

  // The table's state as ADD judges it (address-steps: one listing, then tableState).
  const tableNow = async (run: Run) => tableState(await listProbeTable(run), { uplink: 'eth0' });

  it("ADD's look at the table costs exactly one nft call and answers from it", async () => {
    const present = scripted({ [LIST]: ok(fixture('list-table-after-probes.json')) });
    await expect(tableNow(present.run)).resolves.toBe('matching');
    expect(present.calls).toEqual([LIST]);

    const absent = scripted({ [LIST]: fail(fixture('list-table-absent.stderr')) });
    await expect(tableNow(absent.run)).resolves.toBe('absent');

    const drifted = scripted({ [LIST]: ok(fixture('list-table-drifted.json')) });
    await expect(tableNow(drifted.run)).resolves.toBe('drifted');
  });

  it('reports nft missing as a result, directly or through ip netns exec', async () => {
    for (const answer of [missing, fail('exec of "nft" failed: No such file or directory', 255)]) {
      const { run } = scripted({ [LIST]: answer, 'nft -f -': answer });
      await expect(listProbeTable(run)).resolves.toEqual({ available: false, reason: 'nft not found' });
      await expect(tableNow(run)).resolves.toBe('nft-unavailable');
      await expect(ensureProbeRewrite(run, { uplink: 'eth0' })).resolves.toMatchObject({ available: false });
      await expect(removeProbeRewrite(run)).resolves.toMatchObject({ available: false });
      await expect(probeRewriteStatus(run, { uplink: 'eth0' })).resolves.toMatchObject({ available: false });
    }
  });

  it('throws ToolError for other nft failures', async () => {
    const { run } = scripted({ [LIST]: fail('Error: cache initialization failed: Operation not permitted') });
    await expect(tableNow(run)).rejects.toBeInstanceOf(ToolError);
  });

  it('status: uplink from the default route, BPF wins, tc missing means no BPF', async () => {
    const base = {
      'ip -j -6 route show default': ok(fixture('ip-6-route-default.json')),
      [LIST]: ok(fixture('list-table-after-probes.json')),
    };
    const withBpf = scripted({
      ...base,
      'tc -j qdisc show dev eth0': ok(fixture('tc-qdisc-clsact.json')),
      'tc -j filter show dev eth0 ingress': ok(fixture('tc-filter-ingress-ebpf.json')),
    });
    await expect(probeRewriteStatus(withBpf.run)).resolves.toEqual({
      available: true,
      state: 'handled-by-bpf',
      uplink: 'eth0',
      tablePresent: true,
      counters: { prerouting: { packets: 6, bytes: 512 }, postrouting: { packets: 2, bytes: 208 } },
      matchesExpected: true,
    });
    const noTc = scripted({ ...base, 'tc -j qdisc show dev eth0': missing });
    await expect(probeRewriteStatus(noTc.run)).resolves.toMatchObject({ state: 'present', matchesExpected: true });
  });

  it('the uplink lookup falls back to the IPv4 default route', async () => {
    const { run, calls } = scripted({
      'ip -j -6 route show default': ok('[]\n'),
      'ip -j route show default': ok('[{"dst":"default","gateway":"10.0.0.1","dev":"eth1","flags":[]}]\n'),
      [LIST]: fail(fixture('list-table-absent.stderr')),
      'tc -j qdisc show dev eth1': ok(fixture('tc-qdisc-plain.json')),
    });
    await expect(probeRewriteStatus(run)).resolves.toMatchObject({ state: 'absent', uplink: 'eth1', tablePresent: false, matchesExpected: false });
    expect(calls).not.toContain('tc -j filter show dev eth1 ingress'); // no clsact: one tc call is enough
  });
});

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error');
}
