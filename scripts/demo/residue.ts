// Failure 1: azure-vnet residue. The verified reproduction (field-notes §1): a client on the VNet, a node whose
// uplink eth0 sits in bridge azure0, a pod attached by ptp + host-local. azure-vnet's per-pod rules for 10.240.0.32
// outlived its pod; the next pod to get 10.240.0.32 is unreachable. The shim's ADD removes exactly those rules.
import { mkdir } from 'node:fs/promises';
import { execa } from 'execa';
import type { DemoSection } from './section.js';
import { SHIM, stage } from './lib.js';

const POD = '10.240.0.32';
const DEAD = '0:d:3a:30:47:42';

export const section: DemoSection = {
  name: 'residue',
  async run(d) {
    const s = await stage();
    try {
      d.title('Failure 1: azure-vnet residue (ebtables rules and a neighbour entry that outlive their pod)');
      const node = await s.net.netns('node');
      const vnet = await s.net.netns('vnet');
      await s.net.veth(vnet, 'eth0', node, 'eth0');
      const onNode = (file: string, args: string[], opts: { maxLines?: number } = {}) => d.show('ip', ['netns', 'exec', node, file, ...args], opts);
      const onClient = (file: string, args: string[], opts: { maxLines?: number } = {}) => d.show('ip', ['netns', 'exec', vnet, file, ...args], opts);
      const ping = () => onClient('ping', ['-c', '3', '-i', '0.3', '-W', '1', '-q', POD], { maxLines: 5 });
      const eb = (...args: string[]) => onNode('ebtables', ['-t', 'nat', ...args], { maxLines: 30 });

      d.say(`The node (netns ${node}): uplink eth0 enslaved to bridge azure0 (10.240.0.5/16); the client VNet host 10.240.0.4 (netns ${vnet}).`);
      await onNode('ip', ['link', 'add', 'azure0', 'type', 'bridge']);
      await onNode('ip', ['link', 'set', 'eth0', 'master', 'azure0']);
      await onNode('ip', ['link', 'set', 'azure0', 'up']);
      await onNode('ip', ['addr', 'add', '10.240.0.5/16', 'dev', 'azure0']);
      await onNode('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
      await onClient('ip', ['addr', 'add', '10.240.0.4/16', 'dev', 'eth0']);
      await onClient('ip', ['route', 'add', '10.240.0.32/27', 'via', '10.240.0.5']);
      const linkJson = await execa('ip', ['netns', 'exec', node, 'ip', '-j', 'link', 'show', 'eth0']);
      const eth0Mac = (JSON.parse(linkJson.stdout) as Array<{ address: string }>)[0]!.address;

      d.say('\nWhat azure-vnet (bridge mode) left on this node: node-wide rules (they stay), the per-pod rules of the');
      d.say(`pod that had ${POD} (MAC ${DEAD}, long gone), a neighbour's rules (10.240.0.33) and a PERMANENT neighbour entry.`);
      await eb('-A', 'POSTROUTING', '-s', 'unicast', '-o', 'eth0', '-j', 'snat', '--to-src', eth0Mac, '--snat-arp', '--snat-target', 'ACCEPT');
      await eb('-A', 'PREROUTING', '-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.5', '-j', 'arpreply', '--arpreply-mac', eth0Mac);
      await eb(
        '-A',
        'PREROUTING',
        '-p',
        'ARP',
        '-i',
        'eth0',
        '--arp-op',
        'Reply',
        '-j',
        'dnat',
        '--to-dst',
        'ff:ff:ff:ff:ff:ff',
        '--dnat-target',
        'ACCEPT',
      );
      for (const [ip, mac] of [
        [POD, DEAD],
        ['10.240.0.33', '0:d:3a:30:47:33'],
      ] as const) {
        await eb(
          '-A',
          'PREROUTING',
          '-p',
          'ARP',
          '--arp-op',
          'Request',
          '--arp-ip-dst',
          ip,
          '-j',
          'arpreply',
          '--arpreply-mac',
          mac,
          '--arpreply-target',
          'DROP',
        );
        await eb('-A', 'PREROUTING', '-p', 'IPv4', '-i', 'eth0', '--ip-dst', ip, '-j', 'dnat', '--to-dst', mac, '--dnat-target', 'ACCEPT');
      }
      await onNode('ip', ['neigh', 'add', POD, 'lladdr', DEAD, 'dev', 'azure0', 'nud', 'permanent']);
      const planted = await eb('-L');

      const hostLocal = (dir: string) => ({
        type: 'host-local',
        dataDir: `${s.dataDir}-${dir}`,
        ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]],
      });
      await s.conflist('plain', { cniVersion: '1.0.0', name: 'plain', plugins: [{ type: 'ptp', ipMasq: false, ipam: hostLocal('plain') }] });
      const conflist = await s.conflist('azure', {
        cniVersion: '1.0.0',
        name: 'azure',
        plugins: [
          {
            type: 'ptp',
            ipMasq: false,
            ipam: { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, ipv6ProbeRewrite: 'off', delegate: hostLocal('azure') },
          },
        ],
      });

      d.say('\nThe bug: a new pod gets 10.240.0.32 through ptp + host-local alone (no shim).');
      const podA = await s.net.netns('pod');
      const envA = { ...s.env(), CNI_CONTAINERID: 'pod-a' };
      const addA = await d.show(...s.runner(node, 'add', 'plain', podA), { env: envA, maxLines: 0 });
      d.verdict(addA.exitCode === 0 && addA.stdout.includes(`"${POD}/16"`), `pod a got ${POD}`);
      const bad = await ping();
      d.verdict(bad.exitCode !== 0, 'the client cannot reach it: 100% loss');
      const counted = await onNode('ebtables', ['-t', 'nat', '-L', 'PREROUTING', '--Lc'], { maxLines: 30 });
      const pcnt = Number(/--ip-dst 10\.240\.0\.32 .*pcnt = (\d+)/.exec(counted.stdout)?.[1] ?? 0);
      d.verdict(pcnt > 0, `the stale dnat rule swallowed them (pcnt = ${pcnt}): the frames were re-addressed to the dead MAC`);
      // A conf dir that exists and holds no shim conflist: only the --ip address is looked at (a missing one is exit 3).
      await mkdir(`${s.dir}/none`, { recursive: true });
      await onNode(SHIM, ['residue', 'scan', '--ip', POD, '--conf-dir', `${s.dir}/none`], { maxLines: 30 });
      const scan = await onNode(SHIM, ['residue', 'scan', '--ip', POD, '--conf-dir', `${s.dir}/none`, '--json'], { maxLines: 0 });
      const found =
        scan.exitCode === 1 ? (JSON.parse(scan.stdout) as { counts: { rules: number; neighbours: number; orphans: number } }).counts : undefined;
      d.verdict(
        found?.rules === 2 && found.neighbours === 1 && found.orphans > 0,
        `\`ipam-shim residue scan --ip\` names both rules and the neighbour entry (${JSON.stringify(found)}); the other rules are reported as orphans only`,
      );
      await d.show(...s.runner(node, 'del', 'plain', podA), { env: envA });

      d.say("\nThe cure: the same pod through the shim in ptp's IPAM slot (wrapping host-local).");
      const podB = await s.net.netns('pod');
      const envB = { ...s.env(), CNI_CONTAINERID: 'pod-b' };
      const addB = await d.show(...s.runner(node, 'add', 'azure', podB), { env: envB, maxLines: 0 });
      d.verdict(addB.exitCode === 0 && addB.stdout.includes(`"${POD}/16"`), `pod b got ${POD} again`);
      const good = await ping();
      d.verdict(good.exitCode === 0, 'the client reaches it');
      const after = await eb('-L');
      const podLine = (l: string) => /--(arp-)?ip-dst 10\.240\.0\.32 /.test(l);
      const expected = planted.stdout
        .split('\n')
        .filter((l) => !podLine(l))
        .join('\n')
        .replace(/(PREROUTING, entries: )(\d+)/, (_m, p: string, n: string) => `${p}${Number(n) - 2}`);
      d.verdict(
        after.stdout === expected,
        "exactly the two rules for 10.240.0.32 are gone; 10.240.0.33's and the node-wide rules are byte-for-byte as they were",
      );
      const neigh = await onNode('ip', ['neigh', 'show', 'nud', 'permanent']);
      d.verdict(!neigh.stdout.includes(`${POD} dev azure0`), 'the PERMANENT neighbour entry for 10.240.0.32 on azure0 is gone');

      d.say('\nazure-vnet puts the dnat rule back (it does, on its own ADD/restart): CHECK reports it with code 102.');
      await eb('-A', 'PREROUTING', '-p', 'IPv4', '-i', 'eth0', '--ip-dst', POD, '-j', 'dnat', '--to-dst', DEAD, '--dnat-target', 'ACCEPT');
      const check = await d.show(...s.runner(node, 'check', 'azure', podB), { env: envB });
      d.verdict(check.exitCode !== 0 && /code 102/.test(check.stdout + check.stderr), 'CHECK fails with code 102 and the rule in its details');
      const clean = await onNode(SHIM, ['residue', 'clean', '--apply', '--conflist', conflist]);
      d.verdict(clean.exitCode === 0, '`ipam-shim residue clean --apply` removes it for the ledger IP (and nothing else)');
      const recheck = await d.show(...s.runner(node, 'check', 'azure', podB), { env: envB });
      const again = await ping();
      d.verdict(recheck.exitCode === 0 && again.exitCode === 0, 'CHECK passes and the ping works again');
      await d.show(...s.runner(node, 'del', 'azure', podB), { env: envB });
    } finally {
      await s.cleanup();
    }
  },
};
