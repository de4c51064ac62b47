// One spelling of an attachment (issue 25): the ledger's record file names and IP index, GC's keep/release
// keys, the agent's pod keys and the parse-back (attachmentOfKey) agree, for ifnames with odd characters too.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Attachment, attachmentName } from '../../src/cni/config.js';
import { attachmentKey, attachmentOfKey } from '../../src/ledger/key.js';
import { Ledger } from '../../src/effects/ledger.js';
import { MemoryLedger } from '../support/doubles/memory-ledger.js';
import { planGc } from '../../src/gc/plan.js';
import { viewPods } from '../../src/pods/view.js';
import { podRecord } from '../support/doubles/ledger-record.js';

// CNI_IFNAME may hold anything but "/", ":" and whitespace (libcni's rule, src/cni/env.ts): these reach the ledger.
const LEDGER_IFNAMES = ['eth0', 'eth0.100', 'net1@x', 'v%1-_+=,', 'é1'];
// A GC valid list's ifname is any string (the config schema): these are keys only, and must still parse back.
const KEY_ONLY_IFNAMES = ['a:b', ':', 'x y', 'x/y', ''];

describe('attachment key', () => {
  it('parses back to the attachment, whatever the ifname (the container ID never holds ":")', () => {
    for (const ifname of [...LEDGER_IFNAMES, ...KEY_ONLY_IFNAMES]) {
      const a: Attachment = { containerID: 'cilium-agent-node.1_x', ifname };
      expect(attachmentOfKey(attachmentKey(a))).toEqual(a);
      expect(attachmentName(a)).toBe(`cilium-agent-node.1_x/${ifname}`);
    }
  });

  it('GC keeps a ledger record the valid list names, by the same key, for an ifname holding ":"', () => {
    const rec = { ...podRecord('c1', '10.0.0.5', '2020-01-01T00:00:00Z'), ifname: 'a:b' };
    const plan = planGc({ records: [rec], valid: [{ containerID: 'c1', ifname: 'a:b' }], liveness: new Map(), now: Date.now(), graceMs: 0 });
    expect(plan.kept.map((k) => k.reason)).toEqual(['valid']);
    expect(plan.release).toEqual([]);
  });

  describe('the file ledger', () => {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'attachment-key-'));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('names record files, IP index entries and census entries by attachmentKey; the agent and GC find them by it', async () => {
      const ledger = new Ledger(dir, 'net');
      const memory = new MemoryLedger('net');
      const records = LEDGER_IFNAMES.map((ifname, i) => ({ ...podRecord(`cilium-agent-${i}`, `10.0.0.${i + 1}`), ifname }));
      for (const r of records) {
        await ledger.put(r);
        await memory.put(r);
      }
      const files = (await readdir(join(dir, 'net', 'records'))).filter((f) => f.endsWith('.json')).sort();
      expect(files).toEqual(records.map((r) => `${attachmentKey(r)}.json`).sort());
      for (const [i, r] of records.entries()) {
        const fromFile = attachmentOfKey(files.find((f) => f === `${attachmentKey(r)}.json`)!.slice(0, -'.json'.length));
        expect(fromFile).toEqual({ containerID: r.containerID, ifname: r.ifname });
        expect(await readFile(join(dir, 'net', 'ips', `10.0.0.${i + 1}`), 'utf8')).toBe(attachmentKey(r));
        expect((await ledger.get(fromFile))?.ips).toEqual(r.ips);
        expect((await memory.get(fromFile))?.ips).toEqual(r.ips);
      }
      // The census reads the container ID back from the file name.
      const seen: string[] = [];
      await ledger.census((id) => {
        seen.push(id);
        return true;
      });
      expect(seen.sort()).toEqual(records.map((r) => r.containerID).sort());
      // A second put of another attachment's address names the holder by its key (the IP index parsed back).
      await expect(ledger.put({ ...podRecord('other', '10.0.0.2'), ifname: 'eth0' })).rejects.toThrow(attachmentKey(records[1]!));
      // The agent's pod view: a cached pod with the same attachment is known, not unseen.
      const listed = (await ledger.list()).records;
      const view = viewPods(
        records.map((r) => ({ containerID: r.containerID, ifname: r.ifname, ips: r.ips })),
        listed,
        [],
      );
      expect(view.unseen).toEqual([]);
      // GC keeps every one of them when the runtime's valid list names them.
      const plan = planGc({
        records: listed,
        valid: records.map(({ containerID, ifname }) => ({ containerID, ifname })),
        liveness: new Map(),
        now: Date.now(),
        graceMs: 0,
      });
      expect(plan.kept.map((k) => k.reason)).toEqual(records.map(() => 'valid'));
    });
  });
});
