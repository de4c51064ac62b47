// A warm cache reader (`ipam-shim __read-runtime-cache --serve`) that misbehaves once when told, with no hook in the
// shim: Node's own preload (NODE_OPTIONS=--require FILE, which the single executable honours and the agent's
// children inherit) patches the reader's process.stdout.write. While the file named by MISBEHAVE_ENV exists, the
// next answer is replaced as the file says and the file removed: `garbage` writes a line that is no answer;
// `half` writes the first half of the real answer (no newline) and the reader kills itself (SIGKILL). In any
// other process (the agent itself) the preload does nothing.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The environment variable naming the file that arms the next answer. */
export const MISBEHAVE_ENV = 'IPAM_SHIM_TEST_READER_MISBEHAVES';

const PRELOAD = `
if (process.argv.includes('__read-runtime-cache') && process.argv.includes('--serve')) {
  const fs = require('node:fs');
  const armed = process.env.${MISBEHAVE_ENV};
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk, ...rest) => {
    let how = '';
    try {
      how = fs.readFileSync(armed, 'utf8').trim();
      fs.unlinkSync(armed);
    } catch {}
    if (how === 'garbage') return write('this is not an answer\\n', ...rest);
    if (how === 'half') {
      const text = String(chunk);
      fs.writeSync(1, text.slice(0, Math.floor(text.length / 2)));
      process.kill(process.pid, 'SIGKILL');
    }
    return write(chunk, ...rest);
  };
}
`;

/** Writes the preload into `dir`; the environment to start the agent with, and how to arm the next answer. */
export async function misbehavingReader(dir: string): Promise<{ env: Record<string, string>; arm: (how: 'garbage' | 'half') => Promise<void> }> {
  const preload = join(dir, 'misbehaving-reader.cjs');
  const armed = join(dir, 'misbehave');
  await writeFile(preload, PRELOAD);
  return {
    env: { NODE_OPTIONS: `--require ${preload}`, [MISBEHAVE_ENV]: armed },
    arm: (how) => writeFile(armed, how),
  };
}
