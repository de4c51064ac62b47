// Failure 4: pod ranges over someone else's subnet (Cilium cluster-pool walking into a firewall subnet).
// `plan` answers the seed scenario before scaling, ADD refuses an address inside a reserved subnet with code 100,
// and `doctor` finds the node route that captures the firewall subnet — and is clean once its fix is applied.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { DemoSection } from './section.js';
import { stage, SHIM } from './lib.js';

export const section: DemoSection = {
  name: 'reserved',
  async run(d) {
    const s = await stage();
    try {
      d.title('Failure 4: pod CIDRs over a reserved subnet (cluster-pool 10.0.0.0/8 meets a firewall subnet)');
      d.say('Cilium hands node CIDRs out of 10.0.0.0/8 in order, /24 each, never reusing one. The VNet has a firewall in 10.4.76.0/24.');
      d.say('Before scaling: which node will land on it, and how many can join before that?');
      const plan = await d.show(SHIM, ['plan', '--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.4.76.0/24']);
      d.verdict(
        plan.exitCode === 1 && plan.stdout.includes('index 1100 (10.4.76.0/24 over 10.4.76.0/24); 1100 nodes fit before it'),
        'plan: node CIDR index 1100 collides; 1100 nodes fit before it, 65535 of 65536 are safe',
      );
      const later = await d.show(SHIM, ['plan', '--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.4.76.0/24', '--allocated', '1090']);
      d.verdict(later.stdout.includes('10 more nodes fit before it'), 'with 1090 node CIDRs already handed out: 10 more nodes, then the collision');

      d.say('\nAt ADD: the shim in the IPAM slot wraps host-local over 10.96.0.6-10.96.0.20, with 10.96.0.8/29 reserved.');
      const node = await s.net.netns('node');
      const delegate = {
        type: 'host-local',
        dataDir: s.dataDir,
        ranges: [[{ subnet: '10.96.0.0/24', rangeStart: '10.96.0.6', rangeEnd: '10.96.0.20' }]],
      };
      await s.conflist('fw', {
        cniVersion: '1.0.0',
        name: 'fw',
        plugins: [
          {
            type: 'ptp',
            ipMasq: false,
            ipam: { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, reservedCIDRs: ['10.96.0.8/29'], ipv6ProbeRewrite: 'off', delegate },
          },
        ],
      });
      const store = async () => (await readdir(join(s.dataDir, 'fw')).catch(() => [])).filter((f) => /^\d/.test(f)).sort();
      const ledger = async () => (await readdir(join(s.stateDir, 'fw', 'records')).catch(() => [])).sort();
      const pods: string[] = [];
      for (let i = 0; i < 3; i++) pods.push(await s.net.netns('pod'));
      const a = await d.show(...s.runner(node, 'add', 'fw', pods[0]!), { env: { ...s.env(), CNI_CONTAINERID: 'pod-a' }, maxLines: 4 });
      const b = await d.show(...s.runner(node, 'add', 'fw', pods[1]!), { env: { ...s.env(), CNI_CONTAINERID: 'pod-b' }, maxLines: 4 });
      d.verdict(a.exitCode === 0 && b.exitCode === 0, 'pods a and b get 10.96.0.6 and 10.96.0.7, outside the reserved subnet');
      const c = await d.show(...s.runner(node, 'add', 'fw', pods[2]!), { env: { ...s.env(), CNI_CONTAINERID: 'pod-c' } });
      const refused =
        c.exitCode !== 0 &&
        /"code":\s*100/.test(c.stdout + c.stderr) &&
        (c.stdout + c.stderr).includes('10.96.0.8 is inside reserved CIDR 10.96.0.8/29 (network fw)');
      d.verdict(refused, 'pod c was handed 10.96.0.8: refused with code 100, naming the address, the CIDR and the network');
      const held = await store();
      d.say(`host-local holds ${held.join(', ')}; the ledger has ${(await ledger()).join(', ')}`);
      d.verdict(
        held.join(',') === '10.96.0.6,10.96.0.7' && (await ledger()).length === 2,
        'nothing leaked: the shim released 10.96.0.8 before answering',
      );
      const del = await d.show(...s.runner(node, 'del', 'fw', pods[2]!), { env: { ...s.env(), CNI_CONTAINERID: 'pod-c' } });
      d.verdict(del.exitCode === 0 && (await store()).length === 2, "the runtime's DEL after the failed ADD is clean and touches no other pod");

      d.say('\nOn the node: the uplink eth0 leads to the VNet (gateway 10.240.0.1); cilium_vx leads to other nodes.');
      d.say('The node that got 10.224.0.0/16 as a pod CIDR (an older, larger mask) routes it — firewall 10.224.0.0/24 included — to itself.');
      const host = await s.net.netns('host');
      const vnet = await s.net.netns('vnet');
      const peer = await s.net.netns('peer');
      await s.net.veth(host, 'eth0', vnet, 'eth0');
      await s.net.veth(host, 'cilium_vx', peer, 'eth0');
      const ip = (...args: string[]) => d.show('ip', ['netns', 'exec', host, 'ip', ...args]);
      await ip('addr', 'add', '10.240.0.4/16', 'dev', 'eth0');
      await ip('addr', 'add', '10.0.7.1/24', 'dev', 'cilium_vx');
      await ip('route', 'add', 'default', 'via', '10.240.0.1', 'dev', 'eth0');
      await ip('route', 'add', '10.224.0.0/16', 'via', '10.0.7.2', 'dev', 'cilium_vx');
      const hostLocal = { type: 'host-local', dataDir: join(s.dir, 'node-hl'), ranges: [[{ subnet: '10.0.9.0/24' }]] };
      const conflist = await s.conflist('cilium', {
        cniVersion: '1.0.0',
        name: 'cilium',
        plugins: [
          { type: 'ptp', ipMasq: false, ipam: hostLocal },
          {
            type: 'ipam-shim',
            stateDir: join(s.dir, 'node-state'),
            logFile: s.logFile,
            reservedCIDRs: ['10.224.0.0/24'],
            ipv6ProbeRewrite: 'off',
            delegate: hostLocal,
          },
        ],
      });
      const doctor = (json: boolean) =>
        d.show('ip', ['netns', 'exec', host, SHIM, 'doctor', '--conflist', conflist, '--cni-path', s.cniPath, ...(json ? ['--json'] : [])], {
          maxLines: json ? 0 : 20,
        });
      const found = await doctor(false);
      d.verdict(
        found.exitCode === 1 && found.stdout.includes('route "10.224.0.0/16 via 10.0.7.2 dev cilium_vx" sends all of reserved 10.224.0.0/24'),
        'doctor: exit 1, the capturing route and the reserved CIDR named, with the fix',
      );
      const fix = /`(ip route add [^`]+)`/.exec(found.stdout)?.[1];
      if (fix) {
        d.say('Applying the fix doctor printed:');
        await ip(...fix.split(' ').slice(1));
      }
      const after = await doctor(true);
      let clean = false;
      try {
        const data = JSON.parse(after.stdout) as { findings: Array<{ check: string; verdict: string }> };
        clean = data.findings.filter((f) => f.check.startsWith('reserved')).every((f) => f.verdict === 'ok');
        d.say(`doctor --json after the fix: ${data.findings.map((f) => `${f.check}=${f.verdict}`).join(', ')} (exit ${after.exitCode})`);
      } catch {
        clean = false;
      }
      d.verdict(Boolean(fix) && clean, 'after the more specific route via the VNet gateway, no route captures the firewall subnet');
    } finally {
      await s.cleanup();
    }
  },
};
