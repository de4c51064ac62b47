// The node agent soaked briefly: test/soak/agent.ts runs the BUILT executable's `agent` under a hard
// RLIMIT_NOFILE of 1024 (prlimit) over a ledger and runtime result cache of 200 pods (plus leaked ones it reports
// every pass), 400 passes at 0.1 s with /metrics scraped throughout, and a flood of idle connections to its HTTP
// port. Its open fds must stay flat (the agent used to hold one more log-file descriptor every pass), the flood may
// cost it at most its connection cap and must be closed by the agent itself, and every pass must succeed.
// The full soak (10,000 passes) is the same script with its defaults.
import { execa } from 'execa';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_CONNECTIONS } from '../../src/agent/http-server.js';
import { ROOT, scratch } from '../support/shim/cni.js';
import { rootOrSkip } from '../support/net/netns.js';

const TSX = join(ROOT, 'node_modules/.bin/tsx');
const SCRIPT = join(ROOT, 'test/soak/agent.ts');
const FLOOD = 300;

interface Sample {
  pass: number;
  fds: number;
  rssMiB: number;
  heapMiB: number | undefined;
}

describe.skipIf(!rootOrSkip())('the node agent soaked (test/soak/agent.ts, RLIMIT_NOFILE 1024)', () => {
  let s: Awaited<ReturnType<typeof scratch>>;
  beforeEach(async () => {
    s = await scratch();
  });
  afterEach(() => s.cleanup());

  it('400 passes over 200 pods with /metrics scraped throughout: open fds flat, an idle-connection flood bounded by the cap and closed, every pass ok', {
    timeout: 300_000,
  }, async () => {
    const json = join(s.dir, 'soak.json');
    const r = await execa(
      TSX,
      [
        SCRIPT,
        '--passes',
        '400',
        '--sample-every',
        '100',
        '--pods',
        '200',
        '--leaked',
        '10',
        '--interval',
        '0.1',
        '--nofile',
        '1024',
        '--flood',
        String(FLOOD),
        '--json',
        json,
      ],
      {
        reject: false,
        timeout: 280_000,
        all: true,
      },
    );
    const text = await readFile(json, 'utf8').catch(() => undefined);
    expect(text, `no report: ${r.all}`).toBeDefined();
    const report = JSON.parse(text!) as {
      nofile: string;
      samples: Sample[];
      passes: number;
      scrapes: number;
      failedPasses: number;
      flood: { fdsBefore: number; fdsPeak: number; closedByAgent: number; healthyAfterS: number };
      problems: string[];
    };
    console.log(r.stdout);
    // The limit was in force in the agent itself (what /proc/<pid>/limits shows).
    expect(report.nofile).toBe('1024 1024');
    expect(report.passes).toBeGreaterThanOrEqual(400);
    expect(report.scrapes).toBeGreaterThan(report.samples.length);
    expect(report.samples.map((x) => x.pass)[0]).toBe(1);
    expect(report.samples.length).toBeGreaterThanOrEqual(5);
    const fds = report.samples.map((x) => x.fds);
    // One descriptor more per pass would be +100 between two samples; a pass's own child pipes are a few.
    expect(Math.max(...fds) - fds[0]!, `fds by sample: ${fds.join(' ')}`).toBeLessThanOrEqual(8);
    expect(report.flood.fdsPeak - report.flood.fdsBefore, JSON.stringify(report.flood)).toBeLessThanOrEqual(MAX_CONNECTIONS + 8);
    expect(report.flood.closedByAgent).toBe(FLOOD);
    expect(report.flood.healthyAfterS).toBeLessThan(20);
    expect(report.failedPasses).toBe(0);
    expect(report.problems).toEqual([]);
    expect(r.exitCode, r.all).toBe(0);
  });
});
