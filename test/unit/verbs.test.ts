// The verbs in-process over the narrow Ledger/Delegate interfaces: an in-memory ledger, a scripted delegate and a
// scripted Run (test/support/doubles/verb-context.ts). In addition to the e2e tests, which run the same verbs for real.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { cmdAdd } from '../../src/verbs/add.js';
import { cmdDel } from '../../src/verbs/del.js';
import { cmdGc } from '../../src/verbs/gc.js';
import { allocateAgentIp } from '../../src/agent-ips/allocate.js';
import { FIXES } from '../../src/fixes/registry.js';
import { parseNetConf } from '../../src/cni/config.js';
import { silentLogger } from '../../src/log.js';
import { warm, warmRun } from '../../src/warm.js';
import { takeSpans } from '../../src/spans.js';
import { Ledger } from '../../src/effects/ledger.js';
import { ledgerGauges } from '../../src/metrics.js';
import { chainedConf, fakes, ipamConf, record, resultWith, verbContext } from '../support/doubles/verb-context.js';

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 0,
    (e: unknown) => (e instanceof CniError ? e.code : -1),
  );

describe('ADD in the IPAM slot', () => {
  it('records the attachment the delegate allocated', async () => {
    const f = fakes();
    const result = await cmdAdd(verbContext('ADD', ipamConf(), f));
    expect(result.ips?.map((i) => i.address)).toEqual(['10.0.0.5/24']);
    expect(await f.ledger.get({ containerID: 'c1', ifname: 'eth0' })).toMatchObject({ state: 'attached', ips: ['10.0.0.5'], owner: 'pod' });
  });

  it("records an agentContainerIDs match as cilium-agent's (GC keeps it)", async () => {
    const f = fakes();
    await cmdAdd(verbContext('ADD', ipamConf(), f, { CNI_CONTAINERID: 'cilium-agent-n1' }));
    expect((await f.ledger.get({ containerID: 'cilium-agent-n1', ifname: 'eth0' }))?.owner).toBe('agent');
  });

  it('rolls back when a later step fails: the delegate DEL runs and the record is forgotten', async () => {
    const f = fakes();
    // The delegate hands out an address inside a reserved CIDR: the address step refuses it after the allocation.
    const code = await codeOf(cmdAdd(verbContext('ADD', ipamConf({ reservedCIDRs: ['10.0.0.0/28'] }), f)));
    expect(code).toBe(ErrorCode.ReservedAddress);
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['ADD', 'DEL']);
    expect(f.ledger.records.size).toBe(0);
  });

  it('rolls back when the residue step fails (a tool error after the allocation)', async () => {
    const f = fakes({ run: (file) => (file === 'ebtables' ? '' : { exitCode: 1, stderr: 'ip: boom' }) });
    const code = await codeOf(cmdAdd(verbContext('ADD', ipamConf({ residue: { ebtables: true, neigh: true } }), f)));
    expect(code).not.toBe(0);
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['ADD', 'DEL']);
    expect(f.ledger.records.size).toBe(0);
  });

  it('keeps the intent record for GC when the undo DEL fails too', async () => {
    const f = fakes({
      delegate: {
        del: () => {
          throw new CniError(ErrorCode.DelegateFailed, 'del failed');
        },
      },
    });
    await codeOf(cmdAdd(verbContext('ADD', ipamConf({ reservedCIDRs: ['10.0.0.0/28'] }), f)));
    expect([...f.ledger.records.values()].map((r) => r.state)).toEqual(['intent']);
  });

  it('refuses a repeated ADD and changes nothing', async () => {
    const f = fakes();
    await cmdAdd(verbContext('ADD', ipamConf(), f));
    const before = structuredClone([...f.ledger.records.values()]);
    const code = await codeOf(cmdAdd(verbContext('ADD', ipamConf(), f)));
    expect(code).toBe(ErrorCode.InvalidEnvironment);
    expect([...f.ledger.records.values()]).toEqual(before);
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['ADD']); // no second allocation, no release
  });

  it('counts the residue it removed on the context, not in a module global', async () => {
    const EB =
      'Bridge chain: PREROUTING, entries: 1, policy: ACCEPT\n-p ARP -i eth0 --arp-op Request --arp-ip-dst 10.0.0.5 -j arpreply --arpreply-mac 12:34:56:78:9a:bc\n';
    const f = fakes({
      run: (file, args) =>
        // `ip -j addr show`: the node's own addresses, read once residue is found (none of them is 10.0.0.5).
        file === 'ebtables' ? (args.includes('-L') ? EB : '') : ['neigh', 'route', 'addr'].some((a) => args.includes(a)) ? '[]' : undefined,
    });
    const ctx = verbContext('ADD', ipamConf({ residue: { ebtables: true, neigh: true } }), f);
    await cmdAdd(ctx);
    expect(ctx.counters).toEqual({ residueRules: 1, residueNeighbours: 0 });
    expect(f.run.calls.some((c) => c.file === 'ebtables' && c.args.includes('-D'))).toBe(true);
  });
});

describe('DEL tolerance', () => {
  it('succeeds with no record and no prevResult, releasing through the delegate anyway', async () => {
    const f = fakes();
    await cmdDel(verbContext('DEL', ipamConf(), f));
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['DEL']);
  });

  it('forgets the record once the delegate released the address', async () => {
    const f = fakes({ records: [record('c1')] });
    await cmdDel(verbContext('DEL', ipamConf(), f));
    expect(f.ledger.records.size).toBe(0);
  });

  it('keeps the record when the delegate DEL fails, and passes its error through', async () => {
    const f = fakes({
      records: [record('c1')],
      delegate: {
        del: () => {
          throw new CniError(ErrorCode.DelegateFailed, 'busy');
        },
      },
    });
    expect(await codeOf(cmdDel(verbContext('DEL', ipamConf(), f)))).toBe(ErrorCode.DelegateFailed);
    expect(f.ledger.records.size).toBe(1);
  });

  it('succeeds on a config mistake, and keeps a record it could not release (no readable delegate)', async () => {
    const f = fakes({ records: [record('c1')] });
    const ctx = verbContext('DEL', ipamConf({ delegate: 'not an object' }), f);
    expect(ctx.conf.mistake).toBeDefined();
    await cmdDel({ ...ctx, delegate: undefined });
    expect(f.ledger.records.size).toBe(1);
  });
});

describe('chained DEL (the main plugin releases after us, and may fail)', () => {
  it('keeps the record, marked DELed, and calls no delegate; a repeated DEL keeps the first mark', async () => {
    const f = fakes({ records: [record('c1', { placement: 'chained' })] });
    await cmdDel(verbContext('DEL', chainedConf(resultWith('10.0.0.5/24')), f));
    const first = await f.ledger.get({ containerID: 'c1', ifname: 'eth0' });
    expect(first).toMatchObject({ state: 'attached', ips: ['10.0.0.9'], deletedAt: expect.any(String) });
    await new Promise((r) => setTimeout(r, 5));
    await cmdDel(verbContext('DEL', chainedConf(resultWith('10.0.0.5/24')), f));
    const again = await f.ledger.get({ containerID: 'c1', ifname: 'eth0' });
    expect(again?.deletedAt).toBe(first?.deletedAt);
    expect(again?.updatedAt).not.toBe(first?.updatedAt);
    expect(f.delegate.calls).toEqual([]);
  });

  it('with no record: nothing to mark, DEL succeeds', async () => {
    const f = fakes();
    await cmdDel(verbContext('DEL', chainedConf(resultWith('10.0.0.5/24')), f));
    expect(f.ledger.records.size).toBe(0);
  });
});

describe('GC keep/release', () => {
  const dir = mkdtempSync(join(tmpdir(), 'verbs-gc-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const aliveNs = join(dir, 'alive');
  writeFileSync(aliveNs, '');

  it("keeps the runtime's valid list, the agent's and the live ones; releases only the proven dead", async () => {
    const f = fakes({
      records: [
        record('valid', { ips: ['10.0.0.1'] }),
        record('cilium-agent-node', { owner: 'agent', ips: ['10.0.0.2'] }),
        record('alive', { ips: ['10.0.0.3'], netns: aliveNs }),
        record('dead', { ips: ['10.0.0.4'], netns: join(dir, 'gone') }),
      ],
      run: (file, args) =>
        file === 'nsenter' && args[0] === `--net=${aliveNs}` ? JSON.stringify([{ addr_info: [{ local: '10.0.0.3' }] }]) : undefined,
    });
    const conf = { ...ipamConf(), cniVersion: '1.1.0', 'cni.dev/valid-attachments': [{ containerID: 'valid', ifname: 'eth0' }] };
    const ctx = verbContext('GC', conf, f);
    await cmdGc(ctx);
    expect([...f.ledger.records.keys()].sort()).toEqual(['alive:eth0', 'cilium-agent-node:eth0', 'valid:eth0']);
    const dels = f.delegate.calls.filter((c) => c.command === 'DEL').map((c) => c.env.CNI_CONTAINERID);
    expect(dels).toEqual(['dead']);
    const gc = f.delegate.calls.find((c) => c.command === 'GC');
    expect(gc).toBeDefined();
    expect((gc!.conf['cni.dev/valid-attachments'] as Array<{ containerID: string }>).map((a) => a.containerID).sort()).toEqual([
      'alive',
      'cilium-agent-node',
      'valid',
    ]);
    expect(ctx.counters.gcReleased).toBe(1);
  });
});

describe('agent IPs', () => {
  const deps = (f: ReturnType<typeof fakes>) => ({
    conf: parseNetConf(ipamConf()),
    ledger: f.ledger,
    delegate: f.delegate,
    run: f.run,
    log: silentLogger,
    fixes: FIXES,
  });
  const netnsOk = () => '';

  it('allocates once and reuses the allocation while the delegate still holds it', async () => {
    const f = fakes({ run: netnsOk });
    const first = await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(first).toMatchObject({ action: 'allocated', containerID: 'cilium-agent-node1', ips: ['10.0.0.5'] });
    expect(again).toMatchObject({ action: 'reused', ips: ['10.0.0.5'] });
    expect(f.delegate.calls.filter((c) => c.command === 'ADD')).toHaveLength(1);
    expect((await f.ledger.get({ containerID: 'cilium-agent-node1', ifname: 'eth0' }))?.owner).toBe('agent');
  });

  it('allocates again (DEL first) when the delegate no longer holds the recorded address', async () => {
    let n = 5;
    const f = fakes({
      run: netnsOk,
      delegate: {
        add: () => resultWith(`10.0.0.${n++}`),
        check: () => {
          throw new Error('not held');
        },
      },
    });
    await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(again).toMatchObject({ action: 'reallocated', ips: ['10.0.0.6'] });
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['DEL', 'ADD', 'CHECK', 'DEL', 'ADD']);
  });

  it("refuses an address inside reservedCIDRs (100), as ADD does: the delegate's allocation released, nothing recorded", async () => {
    const f = fakes({ run: netnsOk });
    const d = { ...deps(f), conf: parseNetConf(ipamConf({ reservedCIDRs: ['10.0.0.0/29'] })) };
    expect(await codeOf(allocateAgentIp(d, 'node1'))).toBe(ErrorCode.ReservedAddress);
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['DEL', 'ADD', 'DEL']);
    expect(f.ledger.records.size).toBe(0);
  });

  it('a bad fix setting is 7 before the delegate is asked anything', async () => {
    const f = fakes({ run: netnsOk });
    const d = { ...deps(f), conf: parseNetConf(ipamConf({ reservedCIDRs: ['10.0.0.0/33'] })) };
    expect(await codeOf(allocateAgentIp(d, 'node1'))).toBe(ErrorCode.InvalidNetworkConfig);
    expect(f.delegate.calls).toEqual([]);
  });
});

describe('metrics gauges from the file ledger', () => {
  it('counts every record and the addresses of the agent ones', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'verbs-census-'));
    try {
      const ledger = new Ledger(stateDir, 'unit');
      await ledger.put(record('pod-1', { ips: ['10.0.0.1'] }));
      await ledger.put(record('cilium-agent-n1', { owner: 'agent', ips: ['10.0.0.2', 'fd00::2'] }));
      expect(await ledgerGauges(stateDir, 'unit', ['cilium-agent-*'])).toEqual({ attachments: 2, agentIps: 2 });
      expect(await ledgerGauges(stateDir, 'other', ['cilium-agent-*'])).toEqual({ attachments: 0, agentIps: 0 });
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});

describe('startup-snapshot warm-up', () => {
  it('runs the real ADD (residue cleanup included) and leaves no spans behind', async () => {
    await warm();
    expect(warmRun.calls.filter((c) => c.file === 'ebtables' && c.args.includes('-D'))).toHaveLength(3);
    expect(takeSpans()).toEqual([]);
  });

  it("takes production's neighbour branch: IPv4 from /proc/net/arp, `ip` for IPv6 only", async () => {
    warmRun.calls.length = 0;
    await warm();
    const ip = warmRun.calls.filter((c) => c.file === 'ip').map((c) => c.args.join(' '));
    // The branch an injected Run takes lists both families with `ip -j neigh show`; a real ADD never does.
    expect(ip).not.toContain('-j neigh show');
    expect(ip).toContain('-6 -j neigh show');
    // Both permanent entries were found, the IPv4 one in the ARP file alone, and deleted.
    expect(ip).toEqual(expect.arrayContaining(['neigh del 10.0.0.2 dev eth0', 'neigh del fd00::2 dev eth0']));
  });
});
