// The IPv6 LB-probe topology verified in field notes §3, for the probe-rewrite tests (integration and e2e):
//   netns lb (fe80::1234:5678:9abc only) ── eth0 ── netns node6 (fe80::1, forwarding, default route via lb)
// plus a pod-side packet counter and a real tc `bpf` filter standing in for ACN's ipv6-hp-bpf.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { run, runInNetns, type Run } from '../../../src/effects/exec.js';
import type { TestNet } from './netns.js';

export const UPLINK = 'eth0';
/** Azure LB's probe source and AgentBaker's global stand-in (field notes §3), spelled out: they are a contract. */
export const PROBE_SOURCE = 'fe80::1234:5678:9abc';
export const PROBE_GLOBAL = '2603:1062:0:1:fe80:1234:5678:9abc';

export interface ProbeTopology {
  lb: string;
  node: string;
  inLb: Run;
  inNode: Run;
}

/** lb ── node6; node6's default IPv6 route names the uplink the shim discovers. `lbRoutes`: prefixes lb routes via node6. */
export async function probeTopology(net: TestNet, lbRoutes: readonly string[] = []): Promise<ProbeTopology> {
  const lb = await net.netns('lb');
  const node = await net.netns('node6');
  const [inLb, inNode] = [runInNetns(lb), runInNetns(node)];
  await net.veth(lb, UPLINK, node, UPLINK);
  // Otherwise lb sources its pings from its autoconfigured link-local address, which the rewrite rightly ignores.
  await inLb('ip', ['link', 'set', UPLINK, 'addrgenmode', 'none']);
  await inLb('ip', ['-6', 'addr', 'flush', 'dev', UPLINK]);
  await inLb('ip', ['-6', 'addr', 'add', `${PROBE_SOURCE}/64`, 'dev', UPLINK, 'nodad']);
  for (const prefix of lbRoutes) await inLb('ip', ['-6', 'route', 'add', prefix, 'via', 'fe80::1', 'dev', UPLINK]);
  await inNode('ip', ['-6', 'addr', 'add', 'fe80::1/64', 'dev', UPLINK, 'nodad']);
  await inNode('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
  await inNode('ip', ['-6', 'route', 'add', 'default', 'via', PROBE_SOURCE, 'dev', UPLINK]);
  return { lb, node, inLb, inNode };
}

/** A counter on the pod's input path: what actually arrives, and from where. */
export async function watchPodInput(inPod: Run): Promise<() => Promise<{ echo: number; fromGlobal: number }>> {
  await inPod('nft', ['-f', '-'], {
    input: [
      'table inet podwatch {',
      '  chain input { type filter hook input priority 0;',
      '    icmpv6 type echo-request counter comment "echo"',
      `    ip6 saddr ${PROBE_GLOBAL} counter comment "fromGlobal"`,
      '  }',
      '}',
    ].join('\n'),
  });
  return async () => {
    const out = JSON.parse((await inPod('nft', ['-j', 'list', 'table', 'inet', 'podwatch'])).stdout) as { nftables: Array<Record<string, any>> };
    const packets = (comment: string) =>
      out.nftables
        .filter((o) => o.rule?.comment === comment)
        .flatMap((o) => o.rule.expr.filter((e: any) => e.counter).map((e: any) => e.counter.packets as number))[0] ?? -1;
    return { echo: packets('echo'), fromGlobal: packets('fromGlobal') };
  };
}

export const ping = (inLb: Run, ip: string) => inLb('ping', ['-6', '-c', '2', '-W', '1', ip], { check: false });

/**
 * tc filter arguments for a real eBPF classifier (named like ACN's ipv6_hp_ingress) compiled from LLVM IR when
 * llc is installed; otherwise classic BPF through tc's bytecode form, which needs no ELF file. Both are
 * `kind: bpf` filters, as ipv6-hp-bpf attaches.
 */
export async function bpfFilterArgs(net: TestNet): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'probe6-bpf-'));
  net.defer(() => rm(dir, { recursive: true, force: true }));
  const obj = join(dir, 'ipv6_hp_ingress.o');
  const ir = fileURLToPath(new URL('../../fixtures/nft/tc-pass-classifier.ll', import.meta.url));
  const llc = await run('llc', ['-march=bpf', '-filetype=obj', ir, '-o', obj], { check: false });
  if (llc.exitCode === 0) return ['bpf', 'da', 'obj', obj, 'sec', 'classifier'];
  console.warn('llc unavailable: using a classic BPF filter (tc bytecode) instead of eBPF');
  return ['bpf', 'bytecode', '1,6 0 0 4294967295,'];
}
