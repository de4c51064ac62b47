// A real runtime: podman 4.3 on its CNI backend (libcni 1.1.2) runs busybox containers on a ptp + host-local
// conflist from a temp dir. ADD happens on start, DEL on stop/rm.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rootOrSkip } from '../support/net/netns.js';
import { PodmanBed, hasPodman } from '../support/runtimes/podman.js';

function podmanOrSkip(): boolean {
  if (!rootOrSkip()) return false;
  if (hasPodman()) return true;
  if (process.env.CI === 'true') throw new Error('CI must have podman installed');
  console.warn('skipping: podman is not installed');
  return false;
}
const enabled = podmanOrSkip();

/** A /24 of its own per process (the runner tests use 10.231.x). */
const third = 20 + (process.pid % 200);
const SUBNET = `10.232.${third}.0/24`;
const PREFIX = `10.232.${third}.`;

async function allocations(bed: PodmanBed): Promise<Record<string, string>> {
  const d = path.join(bed.dataDir, bed.network);
  if (!existsSync(d)) return {};
  const out: Record<string, string> = {};
  for (const f of await readdir(d)) if (/^\d+\.\d+\.\d+\.\d+$/.test(f)) out[f] = await readFile(path.join(d, f), 'utf8');
  return out;
}

describe.skipIf(!enabled)('podman 4.3 on the CNI backend', () => {
  let bed: PodmanBed | undefined;

  afterEach(async () => {
    await bed?.cleanup();
    bed = undefined;
  });

  const newBed = () =>
    PodmanBed.create({
      pluginDirs: [process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni'],
      confList: (dirs) => ({
        cniVersion: '0.4.0',
        name: dirs.network,
        plugins: [{ type: 'ptp', ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: SUBNET }]], dataDir: dirs.dataDir } }],
      }),
    });

  it('a started container gets an IP, answers ping from the host, and stop/rm release the allocation', async () => {
    bed = await newBed();
    const { id, netnsPath } = await bed.startContainer('c1');
    expect(netnsPath).toMatch(/^\/run\/netns\//);

    const ips = await bed.containerIPs('c1');
    expect(ips).toHaveLength(1);
    const ip = ips[0]!;
    expect(ip.startsWith(PREFIX)).toBe(true);
    // the container sees it, the host reaches it (ptp's host route), and it reaches the host side
    expect(String((await bed.exec('c1', ['ip', '-4', 'addr', 'show', 'eth0'])).stdout)).toContain(`${ip}/24`);
    await execa('ping', ['-c', '1', '-W', '2', ip]);
    await bed.exec('c1', ['ping', '-c', '1', '-W', '2', `${PREFIX}1`]);

    // host-local's reservation is keyed by podman's container ID; podman's libcni cached the result
    expect(await allocations(bed)).toEqual({ [ip]: `${id}\r\neth0` });
    expect(existsSync(bed.podmanCacheFile(id))).toBe(true);

    await bed.stop('c1'); // CNI DEL
    expect(await allocations(bed)).toEqual({});
    expect(existsSync(bed.podmanCacheFile(id))).toBe(false);
    expect(existsSync(netnsPath)).toBe(false);
    const ping = await execa('ping', ['-c', '1', '-W', '1', ip], { reject: false });
    expect(ping.exitCode).not.toBe(0);
    await bed.rm('c1');
    expect(String((await bed.podman(['ps', '-aq'])).stdout).trim()).toBe('');
  });

  it('rm --force of a running container runs DEL too; a second container gets its own address', async () => {
    bed = await newBed();
    const a = await bed.startContainer('a');
    const b = await bed.startContainer('b');
    const [ipA] = await bed.containerIPs('a');
    const [ipB] = await bed.containerIPs('b');
    expect(ipA).not.toBe(ipB);
    expect(await allocations(bed)).toEqual({ [ipA!]: `${a.id}\r\neth0`, [ipB!]: `${b.id}\r\neth0` });
    await bed.rm('a', { force: true });
    expect(await allocations(bed)).toEqual({ [ipB!]: `${b.id}\r\neth0` });
    // b is still fine
    await execa('ping', ['-c', '1', '-W', '2', ipB!]);
  });
});
