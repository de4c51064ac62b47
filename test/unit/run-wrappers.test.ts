// A Run's capabilities survive any wrapper (src/effects/exec.ts): where its programs run (prefetching starts them
// early only here) and how its netns's /proc is read (src/effects/neigh.ts reads /proc/net/arp instead of starting
// `ip`). A logging or counting wrapper, the agent's default bound and prefetching itself are all made by wrapRun,
// so none can drop them. Over the real Run (which programs ran) and over the warm-up's kind of scripted Run.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { prefetching, run, runElsewhere, withDefaultTimeout, wrapRun, type Run, type RunCall } from '../../src/effects/exec.js';
import { listPermanentNeighbours, parseArpTable } from '../../src/effects/neigh.js';
import { scriptedRun } from '../../src/scripted/scripted-run.js';

/** `inner` behind a wrapper that notes every program it is asked to run (as a logging wrapper would). */
function counting(inner: Run): { run: Run; seen: string[] } {
  const seen: string[] = [];
  const counted = wrapRun(inner, (file, args, opts, through) => {
    seen.push([file, ...args].join(' '));
    return through(file, args, opts);
  });
  return { run: counted, seen };
}

/** The wall clock in ns, as `date +%s%N` prints it. */
const nowNs = () => BigInt(Date.now()) * 1_000_000n;
const CLOCK: RunCall = ['date', ['+%s%N'], { check: false, timeoutMs: 10_000 }];

describe('a wrapper around the real Run', () => {
  it('still reads IPv4 neighbours from /proc/net/arp: no `ip` starts', async () => {
    const { run: counted, seen } = counting(run);
    const found = await listPermanentNeighbours(counted, { v4: true, v6: false });
    expect(seen).toEqual([]);
    expect(found).toEqual(parseArpTable(readFileSync('/proc/net/arp', 'utf8')));
  });

  it('still prefetches: the early call starts at once, through the wrapper, and answers the later one', async () => {
    const { run: counted, seen } = counting(run);
    const early = prefetching(counted, [CLOCK]);
    expect(seen).toEqual(['date +%s%N']); // started now, not when asked
    await new Promise((r) => setTimeout(r, 100));
    const asked = nowNs();
    const answer = await early(...CLOCK);
    expect(BigInt(answer.stdout.trim())).toBeLessThan(asked); // it ran before it was asked for
    expect(seen).toEqual(['date +%s%N']); // and was not run again
    await early(...CLOCK); // a second ask runs the program
    expect(seen).toEqual(['date +%s%N', 'date +%s%N']);
  });

  it("keeps both through the agent's default bound and prefetching, in any order", async () => {
    for (const wrapped of [
      withDefaultTimeout(counting(run).run, 5_000),
      prefetching(withDefaultTimeout(counting(run).run, 5_000), []),
      counting(prefetching(withDefaultTimeout(run, 5_000), [])).run,
    ]) {
      expect(wrapped.here).toBe(true);
      expect(wrapped.readProc).toBeTypeOf('function');
    }
  });
});

describe('a wrapper around a Run elsewhere', () => {
  const ARP = [
    'IP address       HW type     Flags       HW address            Mask     Device',
    '10.0.0.2         0x1         0x6         12:34:56:78:9a:bc     *        eth0',
  ].join('\n');

  it("keeps a script's /proc (the warm-up takes production's branch)", async () => {
    const script = scriptedRun(
      () => '[]',
      [],
      (path) => (path === '/proc/net/arp' ? ARP : ''),
    );
    const { run: counted, seen } = counting(script);
    const found = await listPermanentNeighbours(counted, { v4: true, v6: false });
    expect(found.map((n) => n.ip)).toEqual(['10.0.0.2']);
    expect(seen).toEqual([]);
  });

  it('is never prefetched, and a fake has no /proc: `ip` lists both families', async () => {
    const { run: counted, seen } = counting(scriptedRun(() => '[]'));
    expect(prefetching(counted, [CLOCK])).toBe(counted);
    expect(seen).toEqual([]);
    await listPermanentNeighbours(counted, { v4: true, v6: false });
    expect(seen).toEqual(['ip -j neigh show']);
    expect(runElsewhere(async () => ({ stdout: '', stderr: '', exitCode: 0, timedOut: false, notFound: false })).here).toBe(false);
  });
});
