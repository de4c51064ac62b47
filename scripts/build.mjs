// Build: one esbuild bundle (dist/ipam-shim.js, CommonJS, runs with `node`), then a Node single-executable
// application (dist/ipam-shim) with a code cache, for nodes without Node.js.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { copyFileSync, writeFileSync, chmodSync, rmSync, mkdirSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const finalDist = new URL('../dist/', import.meta.url).pathname;
// Build into a private directory and rename the results into dist/: a build never leaves dist/ half-written
// for a test (or a node) that is running the previous one.
const dist = `${finalDist}.build-${process.pid}/`;
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
mkdirSync(finalDist, { recursive: true });
// dist/ is CommonJS whatever the project's own "type" is.
writeFileSync(`${finalDist}package.json`, JSON.stringify({ type: 'commonjs' }) + '\n');

const { version } = JSON.parse(execFileSync('cat', [new URL('../package.json', import.meta.url).pathname], { encoding: 'utf8' }));
await build({
  entryPoints: ['src/main.ts'],
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  outfile: `${dist}ipam-shim.js`,
  banner: { js: '#!/usr/bin/env node' },
  define: { 'process.env.IPAM_SHIM_VERSION': JSON.stringify(version) },
  legalComments: 'none',
  logLevel: 'warning',
});
chmodSync(`${dist}ipam-shim.js`, 0o755);

if (process.env.IPAM_SHIM_SKIP_SEA !== '1') {
  const seaConfig = `${dist}sea-config.json`;
  writeFileSync(seaConfig, JSON.stringify({ main: `${dist}ipam-shim.js`, output: `${dist}sea-prep.blob`, useCodeCache: true, disableExperimentalSEAWarning: true }));
  execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'inherit' });
  copyFileSync(process.execPath, `${dist}ipam-shim`);
  const postject = require.resolve('postject/dist/cli.js');
  execFileSync(process.execPath, [postject, `${dist}ipam-shim`, 'NODE_SEA_BLOB', `${dist}sea-prep.blob`, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'], { stdio: ['ignore', 'ignore', 'inherit'] });
  chmodSync(`${dist}ipam-shim`, 0o755);
  rmSync(`${dist}sea-prep.blob`);
  rmSync(seaConfig);
}

renameSync(`${dist}ipam-shim.js`, `${finalDist}ipam-shim.js`);
if (process.env.IPAM_SHIM_SKIP_SEA !== '1') renameSync(`${dist}ipam-shim`, `${finalDist}ipam-shim`);
rmSync(dist, { recursive: true, force: true });
