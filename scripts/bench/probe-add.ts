// What the IPv6 probe rewrite costs an ADD on a node where the table is already in place (the common case:
// every pod after the first). The BUILT plugin in the IPAM slot over host-local with an IPv6 range, inside a
// scratch netns that already holds table ip6 azureSLBProbe; ipv6ProbeRewrite auto (uplink discovered from the
// default route, and configured) against off, alternating, same run. Each ADD is followed by an untimed DEL.
//   npx tsx scripts/bench/probe-add.ts [runs]        (root; npm run build first; IPAM_SHIM_BIN for the SEA)
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runInNetns } from '../../src/effects/exec.js';
import { PROBE_TABLE, probeRewriteRuleset } from '../../src/probe-rewrite/ruleset.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SHIM = process.env.IPAM_SHIM_BIN ?? join(ROOT, 'dist/ipam-shim.js');
const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
const RUNS = Math.max(20, Number(process.argv[2] ?? 25));
const WARMUP = 2;

type Variant = 'off' | 'auto' | 'auto, uplink set';
const VARIANTS: Variant[] = ['off', 'auto', 'auto, uplink set'];

const ns = `bench6-${randomBytes(3).toString('hex')}`;
const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-bench-probe-'));
const inNs = runInNetns(ns);

function conf(variant: Variant): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench6',
    type: 'ptp',
    ipam: {
      type: 'ipam-shim',
      stateDir: join(dir, 'state'),
      logFile: join(dir, 'shim.log'),
      ipv6ProbeRewrite: variant === 'off' ? 'off' : 'auto',
      ...(variant === 'auto, uplink set' ? { uplink: 'eth0' } : {}),
      delegate: { type: 'host-local', dataDir: join(dir, 'host-local'), ranges: [[{ subnet: 'fd00:20::/64' }]] },
    },
  });
}

let seq = 0;
/** One timed ADD (and an untimed DEL) of the plugin as its caller would run it on that node. */
async function addOnce(variant: Variant): Promise<number> {
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: `bench-${seq++}`,
    CNI_NETNS: `/run/netns/${ns}`,
    CNI_IFNAME: 'eth0',
    CNI_ARGS: '',
    CNI_PATH: PLUGIN_DIR,
  };
  const input = conf(variant);
  const t0 = performance.now();
  const r = await execa('ip', ['netns', 'exec', ns, SHIM], { input, env, reject: false });
  const ms = performance.now() - t0;
  if (r.exitCode !== 0) throw new Error(`ADD (${variant}) failed: ${r.stdout} ${r.stderr}`);
  if (!String(r.stdout).includes('fd00:20::')) throw new Error(`ADD (${variant}) returned no IPv6 address: ${r.stdout}`);
  const del = await execa('ip', ['netns', 'exec', ns, SHIM], { input, env: { ...env, CNI_COMMAND: 'DEL' }, reject: false });
  if (del.exitCode !== 0) throw new Error(`DEL (${variant}) failed: ${del.stdout}`);
  return ms;
}

async function timeIt(file: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  await inNs(file, args, { check: false });
  return performance.now() - t0;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const stats = (xs: number[]) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
const f = (n: number) => n.toFixed(1).padStart(7);

try {
  await execa('ip', ['netns', 'add', ns]);
  await inNs('ip', ['link', 'set', 'lo', 'up']);
  await inNs('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
  for (const dev of ['eth0', 'eth1']) await inNs('ip', ['link', 'set', dev, 'up']);
  await inNs('ip', ['-6', 'addr', 'add', 'fd00:ffff::1/64', 'dev', 'eth0', 'nodad']);
  await inNs('ip', ['-6', 'route', 'add', 'default', 'via', 'fd00:ffff::2', 'dev', 'eth0']);
  await inNs('nft', ['-f', '-'], { input: probeRewriteRuleset({ uplink: 'eth0' }) });

  const samples: Record<Variant, number[]> = { off: [], auto: [], 'auto, uplink set': [] };
  for (let i = 0; i < WARMUP; i++) for (const v of VARIANTS) await addOnce(v);
  for (let i = 0; i < RUNS; i++) {
    // Rotate the order every round so no variant always runs first (page cache, CPU frequency).
    for (let k = 0; k < VARIANTS.length; k++) {
      const v = VARIANTS[(i + k) % VARIANTS.length]!;
      samples[v].push(await addOnce(v));
    }
  }
  const parts = {
    'ip netns exec true': [] as number[],
    'ip -j -6 route show default': [] as number[],
    'nft -j list table ip6 azureSLBProbe': [] as number[],
  };
  for (let i = 0; i < RUNS; i++) {
    parts['ip netns exec true'].push(await timeIt('true', []));
    parts['ip -j -6 route show default'].push(await timeIt('ip', ['-j', '-6', 'route', 'show', 'default']));
    parts['nft -j list table ip6 azureSLBProbe'].push(await timeIt('nft', ['-j', 'list', 'table', 'ip6', PROBE_TABLE]));
  }

  const ruleset = JSON.parse((await inNs('nft', ['-j', 'list', 'ruleset'])).stdout) as {
    nftables: Array<{ table?: { family: string; name: string }; rule?: unknown }>;
  };
  const tables = ruleset.nftables.flatMap((o) => (o.table ? [`${o.table.family} ${o.table.name}`] : []));
  const rules = ruleset.nftables.filter((o) => o.rule).length;

  const off = stats(samples.off);
  process.stdout.write(
    `\nADD through the built plugin (${SHIM.endsWith('.js') ? 'node dist/ipam-shim.js' : SHIM}), IPAM slot over host-local, IPv6 range,\n`,
  );
  process.stdout.write(`table ip6 ${PROBE_TABLE} already present; ${RUNS} runs per variant, alternating (after ${WARMUP} warm-up rounds)\n\n`);
  process.stdout.write(
    `${'ms'.padEnd(34)} ${'median'.padStart(7)} ${'min'.padStart(7)} ${'max'.padStart(7)}   Δ medians vs off   median of same-round Δ\n`,
  );
  const sign = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)}`;
  for (const v of VARIANTS) {
    const s = stats(samples[v]);
    // Same-round differences pair each ADD with the off ADD next to it: robust against load drifting over the run.
    const paired = samples[v].map((x, i) => x - samples.off[i]!);
    const delta = v === 'off' ? '' : `${sign(s.median - off.median).padStart(16)}   ${sign(median(paired)).padStart(22)}`;
    process.stdout.write(`${`ipv6ProbeRewrite ${v}`.padEnd(34)} ${f(s.median)} ${f(s.min)} ${f(s.max)}   ${delta}\n`);
  }
  process.stdout.write(`\nwhat the check spawns, each through ip netns exec (ms):\n`);
  for (const [name, xs] of Object.entries(parts)) {
    const s = stats(xs);
    const net = name === 'ip netns exec true' ? '' : `  (≈ ${(s.median - median(parts['ip netns exec true'])).toFixed(1)} without ip netns exec)`;
    process.stdout.write(`  ${name.padEnd(38)} median ${f(s.median)}  min ${f(s.min)}  max ${f(s.max)}${net}\n`);
  }
  process.stdout.write(`\nafter ${RUNS * VARIANTS.length + WARMUP * VARIANTS.length} ADDs: tables ${JSON.stringify(tables)}, ${rules} rules\n`);
  if (tables.length !== 1 || tables[0] !== `ip6 ${PROBE_TABLE}` || rules !== 3) {
    process.stdout.write('UNEXPECTED: the table is not exactly one copy of the three rules\n');
    process.exitCode = 1;
  }
} finally {
  await execa('ip', ['netns', 'del', ns], { reject: false });
  await rm(dir, { recursive: true, force: true });
}
