// "The attachment is busy" has one owner (src/fix-list/attachment-lock.ts exclusiveAttachment / AttachmentBusy): GC's
// releases and the agent's steps judge the same held lock alike, over a real ledger in a temp dir.
import { mkdtemp, rm, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShimSettingsSchema, type NetConf } from '../../src/cni/config.js';
import { Ledger } from '../../src/effects/ledger.js';
import { run } from '../../src/effects/exec.js';
import { silentLogger } from '../../src/log.js';
import { runGc } from '../../src/gc/run-gc.js';
import { AttachmentBusy, exclusiveAttachment } from '../../src/contract/attachment-lock.js';
import { podRecord } from '../support/doubles/ledger-record.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const old = new Date(Date.now() - 86_400_000).toISOString();
const attachment = { containerID: 'leak-a', ifname: 'eth0' };

/** GC's verdict and the agent's on one attachment whose lock file holds `holder` (undefined: no lock file). */
async function verdicts(holder: (self: string) => string | undefined) {
  dir = await mkdtemp(join(tmpdir(), 'attachment-busy-'));
  const settings = ShimSettingsSchema.parse({ stateDir: join(dir, 'state') });
  const conf = { raw: {}, cniVersion: '1.0.0', name: 'net', placement: 'chained', settings, prevResult: undefined, validAttachments: [] } as NetConf;
  const ledger = await new Ledger(settings.stateDir, 'net').open();
  await ledger.put(podRecord('leak-a', '10.0.0.1', old));
  const stat = await readFile('/proc/self/stat', 'utf8');
  const self = `${process.pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`;
  const text = holder(self);
  if (text !== undefined) await writeFile(join(ledger.dir, '.attach-leak-a:eth0.lock'), text);
  const agent = await exclusiveAttachment(ledger, attachment, async () => 'ran', 200).catch((e: unknown) =>
    e instanceof AttachmentBusy ? 'busy' : 'error',
  );
  const report = await runGc({
    conf,
    ledger,
    delegate: undefined,
    run,
    log: silentLogger,
    valid: [],
    apply: true,
    graceMs: 0,
    forward: false,
    lockWaitMs: 200,
  });
  const gc = report.skipped.some((s) => s.why === 'busy')
    ? 'busy'
    : report.errors.length
      ? 'error'
      : report.released.length + report.forgotten.length
        ? 'ran'
        : 'nothing';
  return { agent, gc };
}

describe('attachment busy: GC and the agent agree', () => {
  it('a live CNI call holds the lock: busy for both', async () => {
    expect(await verdicts((self) => self)).toEqual({ agent: 'busy', gc: 'busy' });
  });
  it('no lock held: both go ahead', async () => {
    expect(await verdicts(() => undefined)).toEqual({ agent: 'ran', gc: 'ran' });
  });
});
