// The residue reproduction of field-notes §1, shared by the residue suites (runner, CRI, agent, whole node):
// a VNet client namespace on a veth whose node end is enslaved to azure-vnet's bridge, azure-vnet's per-pod rules,
// and the ebtables listing arithmetic the suites assert with.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Run } from '../../../src/effects/exec.js';
import { inNs, type TestNet } from './netns.js';

/** azure-vnet's two per-pod rules (bridge mode, as in the bug report) for `ip` and `mac`: ebtables args after `-A PREROUTING`. */
export const podRules = (ip: string, mac: string): string[][] => [
  ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', ip, '-j', 'arpreply', '--arpreply-mac', mac, '--arpreply-target', 'DROP'],
  ['-p', 'IPv4', '-i', 'eth0', '--ip-dst', ip, '-j', 'dnat', '--to-dst', mac, '--dnat-target', 'ACCEPT'],
];

/**
 * ebtables-restore input (`--noflush`) for azure-vnet's nat table on a node: the `prerouting` rules in order, then its
 * node-wide snat of outgoing frames to eth0's MAC.
 */
export const natRestoreInput = (prerouting: string[][], eth0Mac: string): string =>
  [
    '*nat',
    ...prerouting.map((rule) => `-A PREROUTING ${rule.join(' ')}`),
    `-A POSTROUTING -s unicast -o eth0 -j snat --to-src ${eth0Mac} --snat-arp --snat-target ACCEPT`,
    'COMMIT',
    '',
  ].join('\n');

/**
 * Netns `vnet` (client 10.240.0.4/16) — veth — `node`, whose `eth0` is enslaved to bridge `azure0` (10.240.0.5/16,
 * IPv4 forwarding on); the client routes `podRoute` via the node. Returns the client's netns name.
 */
export async function vnetBridge(net: TestNet, node: string, podRoute = '10.240.0.32/27'): Promise<string> {
  const vnet = await net.netns('vnet');
  await net.veth(vnet, 'eth0', node, 'eth0');
  for (const args of [
    ['link', 'add', 'azure0', 'type', 'bridge'],
    ['link', 'set', 'eth0', 'master', 'azure0'],
    ['link', 'set', 'azure0', 'up'],
    ['addr', 'add', '10.240.0.5/16', 'dev', 'azure0'],
  ]) {
    await inNs(node, 'ip', args);
  }
  await inNs(node, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  await inNs(vnet, 'ip', ['addr', 'add', '10.240.0.4/16', 'dev', 'eth0']);
  await inNs(vnet, 'ip', ['route', 'add', podRoute, 'via', '10.240.0.5']);
  return vnet;
}

/** The bridge nat table as `ebtables -t nat -L` prints it (`program`: a backend's own, e.g. ebtables-nft). */
export const natListing = async (r: Run, program = 'ebtables'): Promise<string> => (await r(program, ['-t', 'nat', '-L'])).stdout;

export const EBTABLES_LEGACY = '/usr/sbin/ebtables-legacy';

/**
 * A node whose `ebtables` alternative is ebtables-legacy, for the processes given the returned PATH only (the
 * machine's update-alternatives is shared and stays as it is): a directory holding `ebtables` → ebtables-legacy,
 * first on PATH, which is what `update-alternatives --set ebtables /usr/sbin/ebtables-legacy` makes /usr/sbin/ebtables.
 * The directory goes with `net`'s cleanup.
 */
export async function legacyFirstPath(net: TestNet): Promise<string> {
  if (!existsSync(EBTABLES_LEGACY)) throw new Error(`${EBTABLES_LEGACY} is missing (Debian package ebtables)`);
  const dir = await mkdtemp(join(tmpdir(), 'ebtables-legacy-alt-'));
  net.defer(() => rm(dir, { recursive: true, force: true }));
  await symlink(EBTABLES_LEGACY, join(dir, 'ebtables'));
  return `${dir}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
}

/** `before` minus the given rule lines, PREROUTING's entry count adjusted: what the listing must become. */
export function withoutLines(before: string, lines: string[]): string {
  const drop = new Set(lines);
  return before
    .split('\n')
    .filter((l) => !drop.has(l))
    .map((l) => l.replace(/^(Bridge chain: PREROUTING, entries: )(\d+)/, (_m, p: string, n: string) => `${p}${Number(n) - lines.length}`))
    .join('\n');
}
