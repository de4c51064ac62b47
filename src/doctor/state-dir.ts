// Doctor's state-dir check: the state directory is private and ours, and every ledger record is readable.
import { lstat } from 'node:fs/promises';
import { ErrorCode } from '../cni/errors.js';
import { type DoctorCheck, type Finding, list } from '../contract/doctor-check.js';

export const stateDirCheck: DoctorCheck = {
  name: 'state-dir',
  async run(net) {
    const name = this.name;
    const { stateDir } = net.conf.settings;
    const uid = process.getuid?.();
    const out: Finding[] = [];
    const dirs = net.ledger.directories();
    let present = 0;
    for (const dir of dirs) {
      const st = await lstat(dir).catch(() => undefined);
      if (!st) continue;
      present++;
      const mode = (st.mode & 0o777).toString(8).padStart(3, '0');
      if (st.isSymbolicLink() || !st.isDirectory()) {
        out.push({
          check: name,
          verdict: 'problem',
          summary: `${dir} is not a directory (symlink?): every ADD fails with code ${ErrorCode.LedgerCorrupt}`,
          fix: `remove ${dir}; the shim recreates it (0700)`,
        });
      } else if (uid !== undefined && st.uid !== uid) {
        out.push({
          check: name,
          verdict: 'problem',
          summary: `${dir} is owned by uid ${st.uid}, not ${uid}: every ADD fails with code ${ErrorCode.LedgerCorrupt}`,
          fix: `chown ${uid} ${dir}`,
        });
      } else if (st.mode & 0o022) {
        out.push({
          check: name,
          verdict: 'problem',
          summary: `${dir} is writable by group or others (mode ${mode}): every ADD fails with code ${ErrorCode.LedgerCorrupt}`,
          fix: `chmod 700 ${dir}`,
        });
      } else if (st.mode & 0o055) {
        out.push({
          check: name,
          verdict: 'warn',
          summary: `${dir} is readable by others (mode ${mode}); the next ADD tightens it`,
          fix: `chmod 700 ${dir}`,
        });
      }
    }
    if (present === 0) return [{ check: name, verdict: 'ok', summary: `${stateDir} does not exist yet (the first ADD creates it, 0700)` }];
    if (out.some((f) => f.verdict === 'problem')) return out; // the ledger refuses to be read until that is fixed
    const { records, corrupt } = await net.ledger.list();
    if (corrupt.length) {
      out.push({
        check: name,
        verdict: 'problem',
        summary: `unreadable ledger records: ${list(corrupt)}; GC releases nothing until they are fixed`,
        fix: 'inspect each file; if the attachment is gone, remove the file (DEL of that container also clears it)',
        data: corrupt,
      });
    }
    if (!out.length) {
      const mode = ((await lstat(net.ledger.dir).catch(() => undefined))?.mode ?? 0o700) & 0o777;
      out.push({ check: name, verdict: 'ok', summary: `${net.ledger.dir}: private (0${mode.toString(8)}, ours), ${records.length} record(s)` });
    }
    return out;
  },
};
