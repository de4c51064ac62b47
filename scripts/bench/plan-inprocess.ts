// `npx tsx scripts/bench/plan-inprocess.ts [--runs N] [--sizes 1,1000,5000,20000] [--cli dist/ipam-shim.js]`: `ipam-shim plan`
// on the issue's large inputs — a 10.0.0.0/8 pool cut into /24 node CIDRs and an fd00::/48 pool cut into /120s
// (65,536 and 2^72 node CIDRs) — against 1k/5k/20k reserved CIDRs. Prints one table; never asserts.
//
// Two measurements per row, one after the other in the same run:
// - in-process: planPool() alone, in a fresh child process per row (so peak RSS belongs to that row): median
//   with min/max over --runs calls after 3 warm-up calls; peak RSS = the child's ru_maxrss at the end, and the
//   growth of ru_maxrss across the plan calls (input already built), i.e. what planning itself added;
// - CLI: the built `ipam-shim plan … --json` end to end (process start, argv parsing, plan, JSON output),
//   median/min/max wall time over --runs runs, peak RSS via /usr/bin/time (ru_maxrss of the child).
// The row with 1 reserved CIDR is the floor: what the same call costs without a list to plan against.
// The CLI build is copied to a temp dir first, so a rebuild of dist/ meanwhile cannot interfere.
// Reserved CIDRs are drawn with a fixed-seed PRNG: prefixes /20 … /30 (IPv4) and /100 … /124 (IPv6), 90 % inside
// the pool, 10 % outside it, overlaps allowed — the shapes an operator's list of VNet subnets has.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { fmtMiB, fmtStats, heading, rssRun, stats, table, timeRun } from '../bench-lib.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TSX = join(ROOT, 'node_modules/.bin/tsx');

interface Input {
  family: 4 | 6;
  pools: string[];
  nodeMask: number;
  reserved: string[];
}

/** mulberry32: a small deterministic PRNG, so every run plans the same lists. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function v4Text(v: number): string {
  return [24, 16, 8, 0].map((s) => (v >>> s) & 255).join('.');
}

function v6Text(v: bigint): string {
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((v >> BigInt(i * 16)) & 0xffffn).toString(16));
  return groups.join(':');
}

export function makeInput(family: 4 | 6, n: number): Input {
  const rand = prng(family * 1_000_003 + n);
  const reserved: string[] = [];
  if (family === 4) {
    for (let i = 0; i < n; i++) {
      const prefix = 20 + Math.floor(rand() * 11);
      const inside = rand() < 0.9;
      const base = inside ? 10 << 24 : (172 << 24) | (16 << 16);
      const span = inside ? 1 << 24 : 1 << 20;
      const addr = (base + Math.floor(rand() * span)) >>> 0;
      const net = prefix === 32 ? addr : (addr & ~((1 << (32 - prefix)) - 1)) >>> 0;
      reserved.push(`${v4Text(net)}/${prefix}`);
    }
    return { family, pools: ['10.0.0.0/8'], nodeMask: 24, reserved };
  }
  const pool = 0xfd00n << 112n; // fd00::/48
  const other = 0xfd01n << 112n;
  for (let i = 0; i < n; i++) {
    const prefix = 100 + Math.floor(rand() * 25);
    const inside = rand() < 0.9;
    // 80 random bits below the /48: two 40-bit draws.
    const low = (BigInt(Math.floor(rand() * 2 ** 40)) << 40n) | BigInt(Math.floor(rand() * 2 ** 40));
    const addr = (inside ? pool : other) | low;
    const host = 128n - BigInt(prefix);
    reserved.push(`${v6Text((addr >> host) << host)}/${prefix}`);
  }
  return { family, pools: ['fd00::/48'], nodeMask: 120, reserved };
}

// ---------------------------------------------------------------------------------------------------------
// Child: planPool in-process, one row.

async function child(family: 4 | 6, n: number, runs: number): Promise<void> {
  const { planPool } = await import('../../src/reserved/plan/pool.js');
  const input = makeInput(family, n);
  const opts = { pools: input.pools, nodeMask: input.nodeMask, reserved: input.reserved };
  const rssBefore = process.resourceUsage().maxRSS;
  let colliding = 0n;
  let first = '';
  for (let i = 0; i < 3; i++) planPool(opts);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const plan = planPool(opts);
    samples.push(performance.now() - t0);
    colliding = plan.families[0]!.collidingBlocks;
    first = String(plan.families[0]!.fromStart.firstCollision?.index ?? '-');
  }
  const rssPeak = process.resourceUsage().maxRSS;
  process.stdout.write(JSON.stringify({ samples, rssBefore, rssPeak, colliding: colliding.toString(), first }));
}

// ---------------------------------------------------------------------------------------------------------
// Parent.

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '20' },
      sizes: { type: 'string', default: '1,1000,5000,20000' },
      cli: { type: 'string', default: join(ROOT, 'dist/ipam-shim.js') },
      child: { type: 'string' },
    },
    strict: true,
  });
  const runs = Math.max(1, Number(values.runs));
  if (values.child) {
    const [family, n] = values.child.split(':').map(Number) as [4 | 6, number];
    await child(family, n, runs);
    return;
  }
  const sizes = values.sizes.split(',').map(Number);
  const built = resolve(values.cli);
  if (!existsSync(built)) throw new Error(`${built} is missing: run "npm run build" first`);
  const copy = mkdtempSync(join(tmpdir(), 'bench-plan-'));
  process.on('exit', () => rmSync(copy, { recursive: true, force: true }));
  const cli = join(copy, basename(built));
  copyFileSync(built, cli);
  const pkg = join(dirname(built), 'package.json');
  if (existsSync(pkg)) copyFileSync(pkg, join(copy, 'package.json'));
  const hasTime = existsSync('/usr/bin/time');

  heading(`ipam-shim plan on large pools (${runs} runs per figure; CLI = ${built.replace(`${ROOT}/`, '')})`);
  const rows: string[][] = [
    [
      'pool, node mask',
      'reserved',
      'node CIDRs',
      'colliding',
      'first',
      'planPool ms median (min–max)',
      'peak RSS MiB (plan +)',
      'CLI ms median (min–max)',
      'CLI peak RSS MiB',
    ],
  ];
  for (const family of [4, 6] as const) {
    for (const n of sizes) {
      const input = makeInput(family, n);
      // in-process, fresh child per row
      const c = await timeRun([TSX, join(ROOT, 'scripts/bench/plan-inprocess.ts'), '--child', `${family}:${n}`, '--runs', String(runs)], {
        timeoutMs: 600_000,
      });
      if (c.code !== 0) throw new Error(`child ${family}:${n} failed: ${c.stderr.slice(0, 2000)}`);
      const r = JSON.parse(c.stdout) as { samples: number[]; rssBefore: number; rssPeak: number; colliding: string; first: string };
      // CLI end to end; argv split into --reserved chunks (one argument may not exceed 128 KiB)
      const args = [process.execPath, cli, 'plan', '--pool', input.pools.join(','), '--node-mask', String(input.nodeMask), '--json'];
      for (let i = 0; i < input.reserved.length; i += 2000) args.push('--reserved', input.reserved.slice(i, i + 2000).join(','));
      const cliMs: number[] = [];
      const cliRss: number[] = [];
      for (let i = 0; i < runs + 1; i++) {
        const t = hasTime ? await rssRun(args) : { ...(await timeRun(args)), maxRssKiB: NaN };
        if (t.code !== 0 && t.code !== 1) throw new Error(`plan CLI exited ${t.code}: ${t.stderr.slice(0, 2000)}`);
        if (i === 0) {
          const out = JSON.parse(t.stdout) as { families: Array<{ collidingBlocks: string }> };
          if (String(out.families[0]!.collidingBlocks) !== r.colliding)
            throw new Error(`CLI and planPool disagree: ${out.families[0]!.collidingBlocks} vs ${r.colliding}`);
          continue; // warm-up (page cache)
        }
        cliMs.push(t.ms);
        cliRss.push(t.maxRssKiB);
      }
      const total = family === 4 ? '65,536' : '2^72';
      rows.push([
        family === 4 ? '10.0.0.0/8, /24' : 'fd00::/48, /120',
        String(n),
        total,
        r.colliding,
        r.first,
        fmtStats(stats(r.samples)),
        `${fmtMiB(r.rssPeak)} (+${fmtMiB(r.rssPeak - r.rssBefore)})`,
        fmtStats(stats(cliMs)),
        fmtMiB(stats(cliRss).max),
      ]);
      process.stderr.write(`  done: IPv${family} ${n}\n`);
    }
  }
  console.log(table(rows));
  console.log(
    `\nplanPool: in-process calls after 3 warm-ups, one fresh process per row; "plan +" is the growth of peak RSS across the calls.` +
      `\nCLI: node dist/ipam-shim.js plan … --json, wall time from spawn to exit; peak RSS is the largest ru_maxrss of the runs.`,
  );
}

// Run when executed (not when imported for its input generator).
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) await main();
