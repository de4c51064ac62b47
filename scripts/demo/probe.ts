// Failure 3: Azure LB's IPv6 health probes. The verified reproduction (field-notes §3): the load balancer (netns lb)
// probes from fe80::1234:5678:9abc; the node (netns node6) must not forward a link-local source, so the probe dies
// there ("Beyond scope"). The shim's ADD of an IPv6 pod installs table ip6 azureSLBProbe and the probe is answered.
import { execa } from 'execa';
import type { DemoSection } from './section.js';
import { SHIM, stage } from './lib.js';

const PROBE_SOURCE = 'fe80::1234:5678:9abc';

/** Until no address in `ns` is tentative (DAD): the pods' default routes use the host veths' link-local addresses. */
async function settle(ns: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await execa('ip', ['netns', 'exec', ns, 'ip', '-6', '-j', 'addr', 'show', 'tentative'], { reject: false });
    const links = JSON.parse(String(r.stdout || '[]')) as Array<{ addr_info?: unknown[] }>;
    if (!links.some((l) => (l.addr_info ?? []).length > 0)) return;
    await new Promise((res) => setTimeout(res, 100));
  }
}

export const section: DemoSection = {
  name: 'probe',
  async run(d) {
    const s = await stage();
    try {
      d.title('Failure 3: IPv6 load-balancer probes from a link-local address never reach the pods');
      const lb = await s.net.netns('lb');
      const node = await s.net.netns('node6');
      await s.net.veth(lb, 'eth0', node, 'eth0');
      const onNode = (file: string, args: string[], opts: { maxLines?: number } = {}) => d.show('ip', ['netns', 'exec', node, file, ...args], opts);
      const onLb = (file: string, args: string[], opts: { maxLines?: number } = {}) => d.show('ip', ['netns', 'exec', lb, file, ...args], opts);
      const probe = async (ip: string) => {
        await settle(node);
        return onLb('ping', ['-6', '-c', '2', '-W', '1', ip], { maxLines: 6 });
      };

      d.say(`The load balancer (netns ${lb}) probes from ${PROBE_SOURCE}, as Azure's does; the node (netns ${node})`);
      d.say('forwards IPv6 and has its default route via the load balancer on eth0.');
      await onLb('ip', ['link', 'set', 'eth0', 'addrgenmode', 'none']);
      await onLb('ip', ['-6', 'addr', 'flush', 'dev', 'eth0']);
      await onLb('ip', ['-6', 'addr', 'add', `${PROBE_SOURCE}/64`, 'dev', 'eth0', 'nodad']);
      await onLb('ip', ['-6', 'route', 'add', 'fd00:10::/32', 'via', 'fe80::1', 'dev', 'eth0']);
      await onNode('ip', ['-6', 'addr', 'add', 'fe80::1/64', 'dev', 'eth0', 'nodad']);
      await onNode('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
      await onNode('ip', ['-6', 'route', 'add', 'default', 'via', PROBE_SOURCE, 'dev', 'eth0']);

      const hostLocal = (subnet: string, name: string) => ({
        type: 'host-local',
        dataDir: `${s.dataDir}-${name}`,
        ranges: [[{ subnet }]],
        routes: [{ dst: '::/0' }],
      });
      await s.conflist('plain6', { cniVersion: '1.0.0', name: 'plain6', plugins: [{ type: 'ptp', ipam: hostLocal('fd00:10:241::/64', 'plain6') }] });
      const conflist = await s.conflist('probe6', {
        cniVersion: '1.0.0',
        name: 'probe6',
        plugins: [
          { type: 'ptp', ipam: { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, delegate: hostLocal('fd00:10:240::/64', 'probe6') } },
        ],
      });

      d.say('\nThe bug: an IPv6 pod attached by ptp + host-local alone (no shim), then the probe.');
      const podA = await s.net.netns('pod');
      const envA = { ...s.env(), CNI_CONTAINERID: 'pod-a' };
      const addA = await d.show(...s.runner(node, 'add', 'plain6', podA), { env: envA, maxLines: 0 });
      const ipA = /"address": "([0-9a-f:]+)\/64"/.exec(addA.stdout)?.[1] ?? 'fd00:10:241::2';
      d.verdict(addA.exitCode === 0, `pod a got ${ipA}`);
      d.say('No nftables table on the node rewrites anything:');
      await onNode('nft', ['list', 'tables']);
      const bad = await probe(ipA);
      d.verdict(
        bad.exitCode !== 0 && /Beyond scope of source address/.test(bad.stdout),
        'the probe fails: the node answers "Beyond scope of source address" and the pod never sees it',
      );

      d.say("\nThe cure: the next pod goes through the shim in ptp's IPAM slot (wrapping host-local, ipv6ProbeRewrite auto).");
      const podB = await s.net.netns('pod');
      const envB = { ...s.env(), CNI_CONTAINERID: 'pod-b' };
      const addB = await d.show(...s.runner(node, 'add', 'probe6', podB), { env: envB, maxLines: 0 });
      const ipB = /"address": "([0-9a-f:]+)\/64"/.exec(addB.stdout)?.[1] ?? 'fd00:10:240::2';
      d.verdict(addB.exitCode === 0, `pod b got ${ipB}; handing out an IPv6 address, the shim found no rewrite and no BPF handler on eth0`);
      const table = await onNode('nft', ['list', 'table', 'ip6', 'azureSLBProbe'], { maxLines: 14 });
      d.verdict(
        table.exitCode === 0 && table.stdout.includes('ip6 saddr set 2603:1062:0:1:fe80:1234:5678:9abc'),
        "table ip6 azureSLBProbe is in place (AgentBaker's rules, one atomic nft transaction)",
      );
      const good = await probe(ipB);
      d.verdict(
        good.exitCode === 0,
        `the probe to pod b is answered: in, the source became 2603:1062:0:1:fe80:1234:5678:9abc; out, the reply's destination became ${PROBE_SOURCE} again`,
      );
      const goodA = await probe(ipA);
      d.verdict(goodA.exitCode === 0, 'the rewrite is node-wide: pod a answers now too');

      d.say('\nWhat an operator sees:');
      const status = await onNode(SHIM, ['probe-rewrite', 'status', '--conflist', conflist], { maxLines: 10 });
      d.verdict(
        status.exitCode === 0 && /counters:\s+prerouting [1-9]/.test(status.stdout),
        '`ipam-shim probe-rewrite status` says present, matching, with the probes counted',
      );

      await d.show(...s.runner(node, 'del', 'probe6', podB), { env: envB });
      await d.show(...s.runner(node, 'del', 'plain6', podA), { env: envA });
    } finally {
      await s.cleanup();
    }
  },
};
