// The runtime's result cache entries matched and bounded as issue 45 asks (findings 6, 7, 8): an entry is a
// network's by the name inside it, so another network sharing the prefix (`tnet-b` beside `tnet`) counts towards
// its own cap, never ours; a cache file's name reaches an operator as one line whatever it holds; an entry whose
// fields are past what Kubernetes allows is malformed: its attachment kept (never released on its word), its pod
// unreadable, the field never kept, and the pass stays small and quick. The reader here is the one the built
// executable's reader child runs (src/gc/cache-read.ts; from sources cachedAttachments reads in-process).
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/index.js';
import { cachedAttachments, MAX_CACHE_ENTRIES, RuntimeCacheError } from '../../src/gc/from-cache.js';
import { MAX_ENTRY_ADDRESSES, MAX_POD_NAME, MAX_POD_NAMESPACE } from '../../src/gc/cache-read.js';

let dir: string | undefined;
const fifos: string[] = [];
afterEach(async () => {
  for (const f of fifos.splice(0)) {
    try {
      closeSync(openSync(f, constants.O_RDWR | constants.O_NONBLOCK));
    } catch {
      // gone already
    }
  }
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

const entry = (network: string, containerId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    kind: 'cniCacheV1',
    containerId,
    ifName: 'eth0',
    networkName: network,
    config: 'e30=',
    result: { ips: [{ address: '10.0.0.2/24' }] },
    ...extra,
  });

async function results(): Promise<{ root: string; results: string }> {
  dir = await mkdtemp(join(tmpdir(), 'cache-entries-'));
  const r = join(dir, 'cache', 'results');
  await mkdir(r, { recursive: true });
  return { root: join(dir, 'cache'), results: r };
}

describe('finding 6: entries are a network by the name inside them, not by a file-name prefix', () => {
  it(`another network sharing the prefix with ${MAX_CACHE_ENTRIES + 1} entries: ours is read, not refused`, { timeout: 120_000 }, async () => {
    const { root, results: r } = await results();
    await writeFile(join(r, 'tnet-a1-eth0'), entry('tnet', 'a1'));
    await writeFile(join(r, 'tnet-a2-eth0'), entry('tnet', 'a2'));
    for (let i = 0; i <= MAX_CACHE_ENTRIES; i++) await writeFile(join(r, `tnet-b-p${i}-eth0`), entry('tnet-b', `p${i}`));
    const view = await cachedAttachments(root, 'tnet');
    expect(view.blind).toBeUndefined();
    expect(view.attachments.map((a) => a.containerID).sort()).toEqual(['a1', 'a2']);
    // tnet-b's own list is past the cap: "could not look" for it.
    const e = await cachedAttachments(root, 'tnet-b').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(RuntimeCacheError);
    expect((e as RuntimeCacheError).why).toContain(`more than the ${MAX_CACHE_ENTRIES} entries of network tnet-b`);
  });
});

describe('finding 7: a cache file name is one line wherever it is printed', () => {
  it("a FIFO named with a newline: the refusal's message, and `ipam-shim gc`'s stderr, forge no line", async () => {
    const { root, results: r } = await results();
    await writeFile(join(r, 'net-ok-eth0'), entry('net', 'ok'));
    const forged = join(r, 'net-x\nipam-shim gc: FORGED everything released-eth0');
    execFileSync('mkfifo', [forged]);
    fifos.push(forged);
    const e = await cachedAttachments(root, 'net').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(RuntimeCacheError);
    expect((e as Error).message).not.toContain('\n');
    expect((e as Error).message).toContain('net-x\\nipam-shim gc: FORGED');
    // Through the command: a conflist and a ledger of its own, the cache above.
    const state = join(dir!, 'state');
    const conflist = join(dir!, '10-net.conflist');
    await writeFile(
      conflist,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'net',
        plugins: [
          { type: 'ptp', ipam: { type: 'host-local' } },
          { type: 'ipam-shim', stateDir: state },
        ],
      }),
    );
    const out = await runCli(['gc', '--conflist', conflist, '--cache-dir', root, '--cni-path', '/nonexistent'], {});
    expect(out.exitCode).not.toBe(0);
    const lines = out.stderr.split('\n').filter(Boolean);
    expect(lines.some((l) => l.includes('FORGED'))).toBe(true);
    expect(lines.filter((l) => l.startsWith('ipam-shim gc: FORGED'))).toEqual([]);
  });
});

describe("finding 8: entries past Kubernetes' limits are malformed", () => {
  const args = (ns: string, name: string) => [
    ['K8S_POD_NAMESPACE', ns],
    ['K8S_POD_NAME', name],
  ];

  it('a pod name, a namespace or an address count past the limit: the attachment kept, the pod unreadable, the field not kept', async () => {
    const { root, results: r } = await results();
    await writeFile(join(r, 'net-ok-eth0'), entry('net', 'ok', { cniArgs: args('default', 'x'.repeat(MAX_POD_NAME)) }));
    await writeFile(join(r, 'net-name-eth0'), entry('net', 'name', { cniArgs: args('default', 'n'.repeat(MAX_POD_NAME + 1)) }));
    await writeFile(join(r, 'net-ns-eth0'), entry('net', 'ns', { cniArgs: args('s'.repeat(MAX_POD_NAMESPACE + 1), 'pod') }));
    const ips = Array.from({ length: MAX_ENTRY_ADDRESSES + 1 }, (_, i) => ({ address: `10.1.${i >> 8}.${i & 255}/16` }));
    await writeFile(join(r, 'net-ips-eth0'), entry('net', 'ips', { result: { ips } }));
    const view = await cachedAttachments(root, 'net');
    // Every attachment stays valid: GC keeps them all.
    expect(view.attachments.map((a) => a.containerID).sort()).toEqual(['ips', 'name', 'ns', 'ok']);
    const pod = (id: string) => view.pods.find((p) => p.containerID === id)!;
    expect(pod('ok')).toMatchObject({ namespace: 'default', name: 'x'.repeat(MAX_POD_NAME), ips: ['10.0.0.2'] });
    expect(pod('ok').unreadable).toBeUndefined();
    expect(pod('name')).toEqual({
      containerID: 'name',
      ifname: 'eth0',
      ips: [],
      unreadable: `malformed: K8S_POD_NAME is ${MAX_POD_NAME + 1} characters, more than the ${MAX_POD_NAME} Kubernetes allows`,
    });
    expect(pod('ns').unreadable).toBe(
      `malformed: K8S_POD_NAMESPACE is ${MAX_POD_NAMESPACE + 1} characters, more than the ${MAX_POD_NAMESPACE} Kubernetes allows`,
    );
    expect(pod('ips')).toMatchObject({
      ips: [],
      unreadable: `malformed: result.ips holds ${MAX_ENTRY_ADDRESSES + 1} addresses, more than the ${MAX_ENTRY_ADDRESSES} an entry may`,
    });
  });

  it('300 entries with a ~1 MB pod name and 40 entries of ~36k addresses: read in seconds, the view holds none of it', {
    timeout: 120_000,
  }, async () => {
    const { root, results: r } = await results();
    const huge = 'p'.repeat(1_000_000 - 200);
    for (let i = 0; i < 300; i++) await writeFile(join(r, `net-n${i}-eth0`), entry('net', `n${i}`, { cniArgs: args('default', huge) }));
    const many = Array.from({ length: 36_000 }, (_, i) => ({ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/8` }));
    const manyText = entry('net', 'x', { result: { ips: many } });
    expect(manyText.length).toBeLessThan(1 << 20);
    for (let i = 0; i < 40; i++) await writeFile(join(r, `net-a${i}-eth0`), entry('net', `a${i}`, { result: { ips: many } }));
    const t0 = performance.now();
    const view = await cachedAttachments(root, 'net');
    const ms = performance.now() - t0;
    expect(view.attachments).toHaveLength(340);
    expect(view.pods.every((p) => p.unreadable?.startsWith('malformed: ') && p.ips.length === 0 && p.name === undefined)).toBe(true);
    // The view is what the pass keeps: a few hundred bytes an entry, not 300 MB of names.
    expect(JSON.stringify(view).length).toBeLessThan(340 * 300);
    // Before: ~36k addresses an entry canonicalised, 34-41 s for 40 of them on the trial's node.
    expect(ms).toBeLessThan(15_000);
  });
});
