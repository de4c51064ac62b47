// node:child_process (with net, dgram and the stream stack: ~59M instructions to load) is loaded by the exec
// wrapper at a call's first program run (issue 44): run as `node ipam-shim.js`, a chained STATUS and VERSION start
// none and never load it. (The single executable's startup snapshot holds it anyway: src/warm.ts says why.) Seen
// from inside the built bundle's own process: a preloaded probe reports, at exit, whether Node loaded the module.
import { afterAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE_SHIM, ROOT } from '../support/shim/cni.js';

const PLUGINS_11 = process.env.CNI_PLUGIN_DIR_11 ?? join(ROOT, '.deps/cni-plugins-1.9');
const dir = mkdtempSync(join(tmpdir(), 'ipam-shim-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const probe = join(dir, 'probe.cjs');
writeFileSync(
  probe,
  "process.on('exit', () => process.stderr.write('child_process loaded: ' + process.moduleLoadList.includes('NativeModule child_process') + '\\n'));\n",
);

const delegate = { type: 'host-local', dataDir: join(dir, 'hl'), ranges: [[{ subnet: '10.99.0.0/24' }]] };
const own = { stateDir: join(dir, 'state'), logFile: join(dir, 'shim.log'), delegate };

/** One call of the bundle under `node --require probe`: its exit code and what the probe said. */
async function call(command: string, conf: unknown): Promise<{ exitCode: number | undefined; loaded: string }> {
  const r = await execa(process.execPath, ['--require', probe, BUNDLE_SHIM], {
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_PATH: PLUGINS_11 },
    extendEnv: false,
    input: JSON.stringify(conf),
    reject: false,
  });
  return { exitCode: r.exitCode, loaded: r.stderr.trim() };
}

describe('node:child_process is loaded only by a call that starts a program', () => {
  it('VERSION: not loaded', async () => {
    expect(await call('VERSION', { cniVersion: '1.1.0' })).toEqual({ exitCode: 0, loaded: 'child_process loaded: false' });
  });
  it("STATUS chained, the delegate's VERSION cached (no program run): not loaded", async () => {
    const chained = { cniVersion: '1.1.0', name: 'lazy', type: 'ipam-shim', ...own };
    // The first call asks host-local its VERSION (a program: loaded) and caches the answer.
    expect(await call('STATUS', chained)).toEqual({ exitCode: 0, loaded: 'child_process loaded: true' });
    expect(await call('STATUS', chained)).toEqual({
      exitCode: 0,
      loaded: 'child_process loaded: false',
    });
  });
  it("STATUS in the IPAM slot (host-local's STATUS is run): loaded, so the probe sees it", async () => {
    expect(await call('STATUS', { cniVersion: '1.1.0', name: 'lazy', type: 'ptp', ipam: { type: 'ipam-shim', ...own } })).toEqual({
      exitCode: 0,
      loaded: 'child_process loaded: true',
    });
  });
});
