// What a delegate's answer proves (issue 47): a CHECK that never fails proves nothing, learnt once per binary and
// cached beside the VERSION answer; a DEL azure-ipam only queued (CNS down) is reported `queued`, never `released`.
// Real files in a temp dir; the delegate's process is a scripted Run.
import { existsSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShimSettingsSchema, type NetConf } from '../../src/cni/config.js';
import { azureDelOutcome } from '../../src/effects/azure-ipam.js';
import { Delegate } from '../../src/effects/delegate.js';
import { Ledger } from '../../src/effects/ledger.js';
import { run } from '../../src/effects/exec.js';
import { scriptedRun } from '../../src/scripted/scripted-run.js';
import { runGc } from '../../src/gc/run-gc.js';
import { silentLogger } from '../../src/log.js';
import { podRecord } from '../support/doubles/ledger-record.js';
import { ScriptedDelegate } from '../support/doubles/scripted-delegate.js';

let dir: string | undefined;
afterEach(async () => {
  delete process.env.IPAM_SHIM_AZURE_DELETE_QUEUE;
  if (dir) await rm(dir, { recursive: true, force: true });
});

const VERSION = JSON.stringify({ cniVersion: '1.0.0', supportedVersions: ['0.3.1', '0.4.0', '1.0.0'] });

describe('Delegate.checkProof', () => {
  async function delegateIn(d: string, checkExit: number) {
    const bin = join(d, 'bin');
    await mkdir(bin, { recursive: true });
    // Written once: the cache is keyed by the binary (path, size, mtime, inode).
    if (!existsSync(join(bin, 'some-ipam'))) await writeFile(join(bin, 'some-ipam'), '#!/bin/sh\n', { mode: 0o755 });
    const r = scriptedRun((_file, _args, opts) => {
      const cmd = opts.env?.CNI_COMMAND;
      if (cmd === 'VERSION') return VERSION;
      if (cmd === 'CHECK') return checkExit ? { exitCode: checkExit, stdout: '{"code":11,"msg":"no allocation for it"}' } : '';
      return '';
    });
    const state = join(d, 'state');
    await mkdir(state, { mode: 0o700, recursive: true });
    const delegate = new Delegate({
      type: 'some-ipam',
      cniPath: [bin],
      env: {},
      timeoutMs: 5000,
      log: silentLogger,
      cacheDir: join(state, '.delegate-versions'),
      run: r,
    });
    return { delegate, r };
  }
  const confFor = (prevResult: Record<string, unknown>) => ({ cniVersion: '1.0.0', name: 'n', ipam: { type: 'some-ipam' }, prevResult });
  const checks = (r: { calls: Array<{ args: readonly string[] }> }) => r.calls.length;

  it('a CHECK that answers success for an attachment nobody allocated proves nothing; the answer is cached per binary', async () => {
    dir = await mkdtemp(join(tmpdir(), 'delegate-proof-'));
    const first = await delegateIn(dir, 0);
    expect(await first.delegate.checkProof(confFor, '1.0.0', '/proc/self/ns/net')).toBe('proves-nothing');
    const probe = first.r.calls.at(-1)!;
    const input = JSON.parse(String(probe.input));
    expect(input.prevResult.ips.map((i: { address: string }) => i.address)).toEqual(['192.0.2.1/32', '2001:db8::1/128']);
    // Another process (a later CNI call) reads the cached answer: no CHECK is sent.
    const second = await delegateIn(dir, 1);
    expect(await second.delegate.checkProof(confFor, '1.0.0', '/proc/self/ns/net')).toBe('proves-nothing');
    expect(checks(second.r)).toBe(0);
  });

  it('a CHECK that fails for it proves; below 0.4.0 there is no CHECK to ask', async () => {
    dir = await mkdtemp(join(tmpdir(), 'delegate-proof-'));
    const { delegate } = await delegateIn(dir, 1);
    expect(await delegate.checkProof(confFor, '1.0.0', '/proc/self/ns/net')).toBe('proves');
    expect(await delegate.checkProof(confFor, '0.3.1', '/proc/self/ns/net')).toBe('no-check');
  });
});

describe("azure-ipam's DEL queue", () => {
  it('queued when the container ID is in the queue, released when the queue is there without it, unseen when nothing above it is visible', async () => {
    dir = await mkdtemp(join(tmpdir(), 'azure-queue-'));
    // /var/run/azure-vnet not mounted here: nothing can be told.
    expect(azureDelOutcome('c1', join(dir, 'azure-vnet', 'deleteIDs'))).toBe('unseen');
    // The directory above is there but no queue yet: azure-ipam creates it at its first queued DEL, so none was.
    expect(azureDelOutcome('c1', join(dir, 'deleteIDs'))).toBe('released');
    await mkdir(join(dir, 'deleteIDs'));
    expect(azureDelOutcome('c1', join(dir, 'deleteIDs'))).toBe('released');
    await writeFile(join(dir, 'deleteIDs', 'c1'), 'c1');
    expect(azureDelOutcome('c1', join(dir, 'deleteIDs'))).toBe('queued');
  });

  it('GC reports a DEL azure-ipam only queued as queued by the delegate, not released', async () => {
    dir = await mkdtemp(join(tmpdir(), 'azure-queue-'));
    const queue = join(dir, 'deleteIDs');
    await mkdir(queue);
    process.env.IPAM_SHIM_AZURE_DELETE_QUEUE = queue;
    const settings = ShimSettingsSchema.parse({ stateDir: join(dir, 'state') });
    const conf = {
      raw: {},
      cniVersion: '1.0.0',
      name: 'net',
      placement: 'chained',
      settings,
      prevResult: undefined,
      validAttachments: [],
    } as NetConf;
    const ledger = await new Ledger(settings.stateDir, 'net').open();
    const old = new Date(Date.now() - 86_400_000).toISOString();
    await ledger.put(podRecord('leak-a', '10.0.0.1', old));
    await ledger.put(podRecord('leak-b', '10.0.0.2', old));
    // azure-ipam with CNS unreachable: leak-a's DEL writes its container ID into the queue and answers success.
    const delegate = new ScriptedDelegate({
      type: 'azure-ipam',
      add: () => {
        throw new Error('no ADD here');
      },
      del: (call) => {
        if (call.env.CNI_CONTAINERID === 'leak-a') writeFileSync(join(queue, 'leak-a'), 'leak-a');
      },
    });
    const report = await runGc({ conf, ledger, delegate, run, log: silentLogger, valid: [], apply: true, graceMs: 0, forward: false });
    expect(report.queued).toEqual([{ containerID: 'leak-a', ifname: 'eth0' }]);
    expect(report.released).toEqual([{ containerID: 'leak-b', ifname: 'eth0' }]);
  });
});

describe("ADD's undo DEL", () => {
  it("carries the runtime's CNI_ARGS: the delegate inherits the caller's environment (as libcni's invoke does)", async () => {
    dir = await mkdtemp(join(tmpdir(), 'delegate-env-'));
    await writeFile(join(dir, 'some-ipam'), '#!/bin/sh\n', { mode: 0o755 });
    const seen: NodeJS.ProcessEnv[] = [];
    const r = scriptedRun((_f, _a, opts) => {
      seen.push(opts.env ?? {});
      return '';
    });
    const runtimeArgs = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1';
    // src/verbs/add.ts undoAllocation: `delegate.del(conf)`, no override; the verbs' delegate env is the process's.
    const delegate = new Delegate({
      type: 'some-ipam',
      cniPath: [dir],
      env: { CNI_ARGS: runtimeArgs, CNI_CONTAINERID: 'c1' },
      timeoutMs: 5000,
      log: silentLogger,
      run: r,
    });
    await delegate.del({ cniVersion: '1.0.0', name: 'n' });
    expect(seen).toMatchObject([{ CNI_COMMAND: 'DEL', CNI_ARGS: runtimeArgs, CNI_CONTAINERID: 'c1' }]);
  });
});
