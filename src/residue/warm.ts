// The build's warm-up answers for what the residue fix reads (src/warm.ts): the nat PREROUTING chain with
// azure-vnet's three per-pod rules for the sample addresses, a permanent IPv4 neighbour in /proc/net/arp (the file
// a real call reads) and an IPv6 one from `ip -6 -j neigh show`, no host routes, one link holding the node's own
// addresses (not the samples': the cleanup's node-own check passes). Deletions succeed.
import type { RunScript } from '../scripted/scripted-run.js';

const EBTABLES = [
  'Bridge table: nat',
  '',
  'Bridge chain: PREROUTING, entries: 3, policy: ACCEPT',
  '-p ARP -i eth0 --arp-op Request --arp-ip-dst 10.0.0.2 -j arpreply --arpreply-mac 12:34:56:78:9a:bc',
  '-p IPv4 -i eth0 --ip-dst 10.0.0.2 -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
  '-p IPv6 -i eth0 --ip6-dst fd00::2 -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
].join('\n');
// /proc/net/arp as Linux prints it: flags 0x6 = ATF_COM | ATF_PERM.
const ARP = [
  'IP address       HW type     Flags       HW address            Mask     Device',
  '10.0.0.2         0x1         0x6         12:34:56:78:9a:bc     *        eth0',
  '10.0.0.1         0x1         0x2         02:00:00:00:00:10     *        eth0',
].join('\n');
const NEIGH6 = '[{"dst":"fd00::2","dev":"eth0","lladdr":"12:34:56:78:9a:bc","state":["PERMANENT"]}]';

const ANSWERS = new Map([
  ['ebtables -t nat -L PREROUTING', EBTABLES],
  ['ip -6 -j neigh show', NEIGH6],
  ['ip -j -4 route show table all', '[]'],
  ['ip -j -6 route show table all', '[]'],
  ['ip -j link show', '[{"ifname":"eth0","address":"02:00:00:00:00:09"}]'],
  [
    'ip -j addr show',
    '[{"ifname":"eth0","address":"02:00:00:00:00:09","addr_info":[{"family":"inet","local":"10.0.0.9","prefixlen":24},{"family":"inet6","local":"fd00::9","prefixlen":64}]}]',
  ],
]);

export const warmRun: RunScript = (file, args) =>
  ANSWERS.get(`${file} ${args.join(' ')}`) ?? (file === 'ebtables' || (file === 'ip' && args[0] === 'neigh') ? '' : undefined);

export const warmProc = { '/proc/net/arp': ARP };
