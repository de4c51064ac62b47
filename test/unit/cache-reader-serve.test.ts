// The warm reader's serve loop (src/gc/cache-read.ts cacheReaderServe): one JSON request a line, one answer a line
// carrying the request's id and what the one-shot reader prints; a request it cannot take ends it.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cacheReaderMain, cacheReaderServe } from '../../src/gc/cache-read.js';

async function* chunks(...parts: string[]): AsyncIterable<Buffer> {
  for (const p of parts) yield Buffer.from(p);
}

describe('cacheReaderServe', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('answers each request on its own line with its id and the one-shot answer, in order, across split chunks', async () => {
    dir = await mkdtemp(join(tmpdir(), 'serve-'));
    await mkdir(join(dir, 'results'));
    const entry = { kind: 'cniCacheV1', containerId: 'c1', ifName: 'eth0', networkName: 'net', result: { ips: [{ address: '10.1.0.5/24' }] } };
    await writeFile(join(dir, 'results', 'net-c1-eth0'), JSON.stringify(entry));
    const out: string[] = [];
    const req = (id: number, network: string) => JSON.stringify({ id, cacheDir: dir, network });
    const first = `${req(7, 'net')}\n${req(8, 'other')}\n`;
    const code = await cacheReaderServe(chunks(first.slice(0, 10), first.slice(10)), async (l) => void out.push(l), Infinity);
    expect(code).toBe(0);
    expect(out.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n'))).toBe(true);
    const answers = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(answers.map((a) => a.id)).toEqual([7, 8]);
    const oneShot = JSON.parse((await cacheReaderMain([dir, 'net'])).stdout) as Record<string, unknown>;
    expect(answers[0]).toEqual({ id: 7, ...oneShot });
    expect(answers[1]).toMatchObject({ id: 8, view: { attachments: [], blind: { kind: 'empty' } } });
  });

  it('a request it cannot parse ends it (exit 2) without an answer', async () => {
    const out: string[] = [];
    expect(await cacheReaderServe(chunks('not json\n'), async (l) => void out.push(l))).toBe(2);
    expect(await cacheReaderServe(chunks('{"id":"x","cacheDir":"/","network":"n"}\n'), async (l) => void out.push(l))).toBe(2);
    expect(await cacheReaderServe(chunks('x'.repeat(70_000)), async (l) => void out.push(l))).toBe(2);
    expect(out).toEqual([]);
  });

  it('ends after an answer when its heap grew past what it may keep (a new reader takes the next read)', async () => {
    const out: string[] = [];
    const req = (id: number) => `${JSON.stringify({ id, cacheDir: '/nonexistent-cache', network: 'n' })}\n`;
    expect(await cacheReaderServe(chunks(req(1) + req(2)), async (l) => void out.push(l), 0)).toBe(0);
    expect(out.map((l) => (JSON.parse(l) as { id: number }).id)).toEqual([1]);
  });
});
