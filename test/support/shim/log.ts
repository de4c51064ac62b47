// The shim's log file as the tests read it: pino JSON, one object a line.
import { readFile } from 'node:fs/promises';

/** The shim's log lines with this message (none while the file does not exist yet). */
export async function logged(logFile: string, msg: string): Promise<Array<Record<string, any>>> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>)
    .filter((l) => l.msg === msg);
}
