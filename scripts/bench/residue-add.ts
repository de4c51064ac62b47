// npx tsx scripts/bench/residue-add.ts [runs]        (root; build first: npm run build; IPAM_SHIM_BIN=dist/ipam-shim for the SEA)
//
// What residue cleanup costs an ADD. The built plugin in the IPAM slot over host-local, invoked the way ptp invokes
// its IPAM plugin, inside scratch network namespaces: one whose bridge nat table holds only node-wide rules, one
// that also holds 5,000 unrelated per-pod residue rules (2,500 dead azure-vnet pods). Each is measured with
// cleanup on (the default) and off (`residue: {ebtables: false, neigh: false}`), the four cases alternating, each
// ADD followed by an untimed DEL. Prints medians with min/max in one table.
import { execa } from 'execa';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';

const ROOT = resolve(import.meta.dirname, '../..');
const SHIM = process.env.IPAM_SHIM_BIN ?? join(ROOT, 'dist/ipam-shim.js');
const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
const RUNS = Number(process.argv[2] ?? 25);
const BULK = 5000;

if (process.getuid?.() !== 0) {
  process.stderr.write('bench-residue: needs root (network namespaces, ebtables)\n');
  process.exit(2);
}
if (!(RUNS >= 1)) {
  process.stderr.write('usage: npx tsx scripts/bench/residue-add.ts [runs ≥ 1]\n');
  process.exit(2);
}

const id = randomBytes(3).toString('hex');
const namespaces: string[] = [];
let dir = '';

async function netns(name: string, rules: number): Promise<string> {
  const ns = `bres-${name}-${id}`;
  await execa('ip', ['netns', 'add', ns]);
  namespaces.push(ns);
  const inNs = (file: string, args: string[], input?: string) => execa('ip', ['netns', 'exec', ns, file, ...args], { input: input ?? '' });
  await inNs('ip', ['link', 'set', 'lo', 'up']);
  await inNs('ip', ['link', 'add', 'azure0', 'type', 'bridge']);
  await inNs('ip', ['link', 'set', 'azure0', 'up']);
  const mac = '02:00:0a:f0:00:05';
  const lines = [
    '*nat',
    `-A PREROUTING -p ARP --arp-op Request --arp-ip-dst 10.240.0.5 -j arpreply --arpreply-mac ${mac}`,
    '-A PREROUTING -p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
    `-A POSTROUTING -s unicast -o eth0 -j snat --to-src ${mac} --snat-arp --snat-target ACCEPT`,
  ];
  for (let i = 0; i < rules / 2; i++) {
    const ip = `10.242.${Math.floor(i / 250)}.${(i % 250) + 1}`;
    const m = `0:d:3a:2:${(i >> 8).toString(16)}:${(i & 255).toString(16)}`;
    lines.push(`-A PREROUTING -p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${m} --arpreply-target DROP`);
    lines.push(`-A PREROUTING -p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${m} --dnat-target ACCEPT`);
  }
  lines.push('COMMIT', '');
  await inNs('ebtables-restore', ['--noflush'], lines.join('\n'));
  const listed = (await inNs('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
  const entries = Number(/entries: (\d+)/.exec(listed)?.[1]);
  if (entries !== rules + 2) throw new Error(`${ns}: expected ${rules + 2} PREROUTING rules, found ${entries}`);
  return ns;
}

interface Case {
  label: string;
  ns: string;
  cleanup: boolean;
  times: number[];
}

function conf(c: Case): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench',
    type: 'ptp',
    ipam: {
      type: 'ipam-shim',
      stateDir: join(dir, 'state'),
      logFile: join(dir, 'shim.log'),
      ...(c.cleanup ? {} : { residue: { ebtables: false, neigh: false } }),
      delegate: {
        type: 'host-local',
        dataDir: join(dir, 'host-local'),
        ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.3.254' }]],
      },
    },
  });
}

async function invoke(c: Case, command: 'ADD' | 'DEL', containerID: string): Promise<number> {
  const env = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerID,
    CNI_NETNS: `/run/netns/${c.ns}`,
    CNI_IFNAME: 'eth0',
    CNI_ARGS: '',
    CNI_PATH: PLUGIN_DIR,
  };
  const t0 = process.hrtime.bigint();
  // nsenter: the plugin runs in the node's netns, as a runtime there would start it (no mount-namespace setup cost).
  const r = await execa('nsenter', [`--net=/run/netns/${c.ns}`, SHIM], { input: conf(c), env, extendEnv: false, reject: false });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.exitCode !== 0) throw new Error(`${command} (${c.label}) failed: ${r.stdout || r.stderr}`);
  return ms;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const f = (ms: number) => ms.toFixed(1).padStart(7);

async function main(): Promise<void> {
  dir = await mkdtemp(join(tmpdir(), 'bench-residue-'));
  process.stdout.write(`preparing: 2 netns (node-wide rules; + ${BULK} unrelated residue rules), ${SHIM}\n`);
  const ns0 = await netns('0', 0);
  const ns5k = await netns('5k', BULK);
  const cases: Case[] = [
    { label: 'cleanup off,     0 residue rules', ns: ns0, cleanup: false, times: [] },
    { label: 'cleanup on,      0 residue rules', ns: ns0, cleanup: true, times: [] },
    { label: `cleanup off, ${BULK.toLocaleString('en')} residue rules`, ns: ns5k, cleanup: false, times: [] },
    { label: `cleanup on,  ${BULK.toLocaleString('en')} residue rules`, ns: ns5k, cleanup: true, times: [] },
  ];
  // Warm-up (page cache, delegate VERSION cache): one untimed ADD/DEL per case.
  for (const [i, c] of cases.entries()) {
    await invoke(c, 'ADD', `warm-${i}`);
    await invoke(c, 'DEL', `warm-${i}`);
  }
  for (let run = 0; run < RUNS; run++) {
    // Rotate the order every run so no case always goes first.
    for (let k = 0; k < cases.length; k++) {
      const i = (k + run) % cases.length;
      const c = cases[i]!;
      const cid = `bench-${run}-${i}`;
      c.times.push(await invoke(c, 'ADD', cid));
      await invoke(c, 'DEL', cid);
    }
    process.stdout.write(`\rrun ${run + 1}/${RUNS}`);
  }
  process.stdout.write('\n\n');
  const off0 = median(cases[0]!.times);
  const off5k = median(cases[2]!.times);
  const header = `| ADD (IPAM slot over host-local, ${process.env.IPAM_SHIM_BIN ? 'SEA' : 'node dist/ipam-shim.js'}) | runs | median ms | min ms | max ms | median − cleanup off |`;
  process.stdout.write(
    `${header}\n|${header
      .split('|')
      .slice(1, -1)
      .map(() => '---')
      .join('|')}|\n`,
  );
  for (const c of cases) {
    const base = c.ns === ns0 ? off0 : off5k;
    const delta = c.cleanup ? `${(median(c.times) - base >= 0 ? '+' : '') + (median(c.times) - base).toFixed(1)}` : '–';
    process.stdout.write(
      `| ${c.label} | ${c.times.length} | ${f(median(c.times))} | ${f(Math.min(...c.times))} | ${f(Math.max(...c.times))} | ${delta.padStart(7)} |\n`,
    );
  }
  const t0 = process.hrtime.bigint();
  await execa('nsenter', [`--net=/run/netns/${ns5k}`, 'ebtables', '-t', 'nat', '-L', 'PREROUTING']);
  process.stdout.write(
    `\nfor scale: one \`ebtables -t nat -L PREROUTING\` of ${BULK + 2} rules takes ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1)} ms here\n`,
  );
}

async function cleanup(): Promise<void> {
  for (const ns of namespaces.splice(0)) await execa('ip', ['netns', 'del', ns], { reject: false });
  if (dir) await rm(dir, { recursive: true, force: true });
}

process.on('SIGINT', () => {
  void cleanup().then(() => process.exit(130));
});
try {
  await main();
} finally {
  await cleanup();
}
