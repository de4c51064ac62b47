// The metrics file is an operator's path (`metricsFile`): updateMetricsFile on what is no regular file of its own.
// A FIFO there hung every CNI call (STATUS too), /dev/zero and a sparse file were read whole; each is now refused at
// once, left as it is, and the caller logs it once (src/metrics.ts recordInvocation).
import { execa } from 'execa';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { METRICS_MAX_BYTES, parseMetrics, updateMetricsFile, type Update } from '../../src/metrics.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-metrics-file-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const u: Update = { network: 'cilium', verb: 'ADD', code: 0, counts: {}, nowSeconds: 1_700_000_000 };

/** updateMetricsFile's error (undefined: it wrote), and how long it took. */
async function update(file: string): Promise<{ error: unknown; ms: number }> {
  const t0 = performance.now();
  const error = await updateMetricsFile(file, u).then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: performance.now() - t0 };
}

describe('updateMetricsFile on a path that is not a regular file of its own', () => {
  it('a FIFO with no writer: refused at once, the FIFO left in place', async () => {
    const file = join(dir, 'ipam-shim.prom');
    await execa('mkfifo', [file]);
    const r = await update(file);
    expect(r.ms).toBeLessThan(1000);
    expect((r.error as Error).message).toBe(`${file} is not a regular file (a FIFO)`);
    expect((await stat(file)).isFIFO()).toBe(true);
    expect(await readdir(dir)).toEqual(['ipam-shim.prom']); // no lock, no temp file left
  });

  it('a symlink to /dev/zero: refused (not followed), the link left in place', async () => {
    const file = join(dir, 'ipam-shim.prom');
    await symlink('/dev/zero', file);
    const r = await update(file);
    expect(r.error).toMatchObject({ code: 'ELOOP' });
    expect((await lstat(file)).isSymbolicLink()).toBe(true);
  });

  it('a sparse file past the bound: refused from its size, not read; one at the bound is read', async () => {
    const file = join(dir, 'ipam-shim.prom');
    await writeFile(file, '');
    await truncate(file, 2 * 1024 ** 3);
    const rss = process.memoryUsage().rss;
    const r = await update(file);
    expect(r.ms).toBeLessThan(1000);
    expect((r.error as Error).message).toMatch(/is 2147483648 bytes, over the 1048576-byte bound/);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 1024 * 1024);
    expect((await stat(file)).size).toBe(2 * 1024 ** 3);
    // A real file within the bound still counts on.
    await writeFile(file, 'ipam_shim_invocations_total{network="cilium",verb="ADD"} 41\n'.padEnd(METRICS_MAX_BYTES, '#'));
    expect((await update(file)).error).toBeUndefined();
    expect(parseMetrics(await readFile(file, 'utf8')).get('ipam_shim_invocations_total{network="cilium",verb="ADD"}')?.value).toBe(42);
  });

  it('a metrics directory that is a symlink: refused, the victim directory gets nothing', async () => {
    const victim = join(dir, 'victim');
    await mkdir(victim);
    await symlink(victim, join(dir, 'metrics'));
    const r = await update(join(dir, 'metrics', 'ipam-shim.prom'));
    expect((r.error as Error).message).toMatch(/metrics is a symlink/);
    expect(await readdir(victim)).toEqual([]);
  });

  it('a metrics directory that is a symlink to one holding a file of that name: that file neither read nor written', async () => {
    const victim = join(dir, 'victim');
    await mkdir(victim);
    const planted = 'ipam_shim_invocations_total{network="victim",verb="ADD"} 4242\n';
    await writeFile(join(victim, 'ipam-shim.prom'), planted, { mode: 0o600 });
    await symlink(victim, join(dir, 'metrics'));
    const r = await update(join(dir, 'metrics', 'ipam-shim.prom'));
    expect(r.ms).toBeLessThan(1000);
    expect((r.error as Error).message).toMatch(/metrics is a symlink/);
    expect(await readFile(join(victim, 'ipam-shim.prom'), 'utf8')).toBe(planted);
    expect(await readdir(victim)).toEqual(['ipam-shim.prom']); // no lock, no temp file
  });
});
