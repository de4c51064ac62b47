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
import { allocateAgentIp, confirmAgentIp } from '../../src/agent-ips/allocate.js';
import { FIXES } from '../../src/fix-list/registry.js';
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

  it('records the CNI_ARGS the runtime gave, every pair as given (what later DELs carry)', async () => {
    const f = fakes();
    const args = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1';
    await cmdAdd(verbContext('ADD', ipamConf(), f, { CNI_ARGS: args }));
    expect(await f.ledger.get({ containerID: 'c1', ifname: 'eth0' })).toMatchObject({ cniArgs: args, pod: { name: 'web-1' } });
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

  it("DELs a leak under the CNI_ARGS its ADD recorded, never the GC call's own (issue 47's measurement 2)", async () => {
    const args = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=dead';
    const old = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-2;K8S_POD_INFRA_CONTAINER_ID=old;K8S_POD_UID=u2';
    const f = fakes({
      records: [
        record('dead', { ips: ['10.0.0.4'], netns: join(dir, 'gone'), cniArgs: args }),
        // An older shim's record: no cniArgs, but its pod: rebuilt as containerd sends them.
        record('old', { ips: ['10.0.0.5'], netns: join(dir, 'gone'), cniArgs: undefined, pod: { namespace: 'default', name: 'web-2', uid: 'u2' } }),
        // An older shim's record naming no pod: withheld, no DEL at all.
        record('nameless', { ips: ['10.0.0.6'], netns: join(dir, 'gone'), cniArgs: undefined }),
      ],
    });
    const ctx = verbContext('GC', { ...ipamConf(), cniVersion: '1.1.0', 'cni.dev/valid-attachments': [] }, f, { CNI_ARGS: '' });
    await cmdGc(ctx);
    const dels = f.delegate.calls.filter((c) => c.command === 'DEL').map((c) => [c.env.CNI_CONTAINERID, c.env.CNI_ARGS]);
    expect(dels.sort()).toEqual([
      ['dead', args],
      ['old', old],
    ]);
    expect([...f.ledger.records.keys()]).toEqual(['nameless:eth0']);
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

  /** A CHECK that fails for what the delegate never allocated (host-local's): CHECK proves. */
  const provingCheck = (call: { env: NodeJS.ProcessEnv }) => {
    if (call.env.CNI_CONTAINERID?.startsWith('ipam-shim-check-probe-')) throw new CniError(ErrorCode.Internal, 'no allocation for it');
  };

  it('allocates once and reuses the allocation while a CHECK that can fail confirms it', async () => {
    const f = fakes({ run: netnsOk, delegate: { check: provingCheck } });
    const first = await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(first).toMatchObject({ action: 'allocated', containerID: 'cilium-agent-node1', ips: ['10.0.0.5'] });
    expect(again).toMatchObject({ action: 'reused', ips: ['10.0.0.5'], verifiedBy: 'check' });
    expect(f.delegate.calls.filter((c) => c.command === 'ADD')).toHaveLength(1);
    expect((await f.ledger.get({ containerID: 'cilium-agent-node1', ifname: 'eth0' }))?.owner).toBe('agent');
  });

  it('allocates again (DEL first) when a CHECK that can fail says the delegate no longer holds the address', async () => {
    let n = 5;
    const f = fakes({
      run: netnsOk,
      delegate: {
        add: () => resultWith(`10.0.0.${n++}`),
        check: () => {
          throw new CniError(ErrorCode.Internal, 'not held');
        },
      },
    });
    await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(again).toMatchObject({ action: 'reallocated', ips: ['10.0.0.6'] });
    // The probe's CHECK (an attachment never allocated), the owner's CHECK, then DEL and ADD.
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['DEL', 'ADD', 'CHECK', 'CHECK', 'DEL', 'ADD']);
  });

  it("every call carries the owner's own identity, unique per owner (two owners never share a pod key)", async () => {
    let n = 5;
    const f = fakes({ run: netnsOk, delegate: { check: provingCheck, add: () => resultWith(`10.0.0.${n++}`) } });
    await allocateAgentIp(deps(f), 'health');
    await allocateAgentIp(deps(f), 'ingress');
    const args = (owner: string) =>
      new Set(f.delegate.calls.filter((c) => c.env.CNI_CONTAINERID === `cilium-agent-${owner}`).map((c) => c.env.CNI_ARGS));
    expect([...args('health')]).toEqual([
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=cilium-agent-health.ipam-shim;K8S_POD_INFRA_CONTAINER_ID=cilium-agent-health',
    ]);
    expect([...args('ingress')]).toEqual([
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=cilium-agent-ingress.ipam-shim;K8S_POD_INFRA_CONTAINER_ID=cilium-agent-ingress',
    ]);
    expect((await f.ledger.get({ containerID: 'cilium-agent-health', ifname: 'eth0' }))?.cniArgs).toContain(
      'K8S_POD_NAME=cilium-agent-health.ipam-shim',
    );
  });

  it('where CHECK proves nothing, a repeated ADD for the identity that answers the same address confirms it (reused)', async () => {
    const f = fakes({ run: netnsOk });
    await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(again).toMatchObject({ action: 'reused', ips: ['10.0.0.5'], verifiedBy: 'add' });
    expect(f.delegate.calls.map((c) => c.command)).toEqual(['DEL', 'ADD', 'CHECK', 'ADD']);
  });

  it('where CHECK proves nothing and the repeated ADD answers another address, DEL then ADD (reallocated, with a note)', async () => {
    let n = 5;
    const f = fakes({ run: netnsOk, delegate: { add: () => resultWith(`10.0.0.${n++}`) } });
    await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(again).toMatchObject({ action: 'reallocated', ips: ['10.0.0.7'] });
    expect(again.note).toMatch(/CHECK proves nothing.*answered 10\.0\.0\.6/);
  });

  it('where CHECK proves nothing and the repeated ADD fails, says unverified, never reused, and records it', async () => {
    let adds = 0;
    const f = fakes({
      run: netnsOk,
      delegate: {
        add: () => {
          if (adds++) throw new CniError(ErrorCode.Internal, 'duplicate allocation is not allowed');
          return resultWith('10.0.0.5');
        },
      },
    });
    await allocateAgentIp(deps(f), 'node1');
    const again = await allocateAgentIp(deps(f), 'node1');
    expect(again).toMatchObject({ action: 'unverified', ips: ['10.0.0.5'], verifiedBy: 'none' });
    expect((await f.ledger.get({ containerID: 'cilium-agent-node1', ifname: 'eth0' }))?.verified).toMatchObject({ by: 'none' });
  });

  it("under a 0.3.1 list (AKS's: no CHECK) a delegate that speaks 1.0.0 is still asked by CHECK, in 1.0.0", async () => {
    // host-local 1.1.1's versions.
    const f = fakes({ run: netnsOk, delegate: { check: provingCheck, versions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0'] } });
    const d = { ...deps(f), conf: parseNetConf({ ...ipamConf(), cniVersion: '0.3.1' }) };
    await allocateAgentIp(d, 'node1');
    expect(await allocateAgentIp(d, 'node1')).toMatchObject({ action: 'reused', verifiedBy: 'check' });
    const checks = f.delegate.calls.filter((c) => c.command === 'CHECK');
    expect(checks.map((c) => c.conf.cniVersion)).toEqual(['1.0.0', '1.0.0']);
    // The ADDs stay in the list's version.
    expect(f.delegate.calls.filter((c) => c.command === 'ADD').map((c) => c.conf.cniVersion)).toEqual(['0.3.1']);
  });

  it('a delegate that speaks nothing with CHECK is confirmed by a repeated ADD', async () => {
    const f = fakes({ run: netnsOk, delegate: { check: provingCheck, versions: ['0.3.0', '0.3.1'] } });
    const d = { ...deps(f), conf: parseNetConf({ ...ipamConf(), cniVersion: '0.3.1' }) };
    await allocateAgentIp(d, 'node1');
    expect(await allocateAgentIp(d, 'node1')).toMatchObject({ action: 'reused', verifiedBy: 'add' });
    expect(f.delegate.calls.filter((c) => c.command === 'CHECK')).toEqual([]);
  });

  it("the agent's confirmation never allocates an owner that is not recorded (released meanwhile)", async () => {
    const f = fakes({ run: netnsOk });
    expect(await confirmAgentIp(deps(f), 'gone')).toBeUndefined();
    expect(f.delegate.calls).toEqual([]);
    expect(f.run.calls).toEqual([]);
  });

  it("an older shim's agent-ip record keeps the identity it was allocated under ('') until it is allocated again", async () => {
    const old = record('cilium-agent-node1', { owner: 'agent', placement: 'cli', ips: ['10.0.0.5'], cniArgs: undefined });
    const f = fakes({ run: netnsOk, records: [old] });
    expect(await allocateAgentIp(deps(f), 'node1')).toMatchObject({ action: 'reused', identity: '' });
    expect(f.delegate.calls.filter((c) => c.env.CNI_CONTAINERID === 'cilium-agent-node1').map((c) => c.env.CNI_ARGS)).toEqual(['']);
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
