// A release says one version everywhere (docs/releasing.md): package.json, the CHANGELOG's newest section under
// Unreleased (written for operators: it opens with the upgrade steps), every image tag and version label in deploy/,
// the Containerfile's default, and the examples in README and docs; `npm run image -- --tag NAME` tags the version.
import { describe, expect, it } from 'vitest';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { imageName, ROOT } from '../../scripts/image/build-image.js';

const read = (p: string) => readFile(join(ROOT, p), 'utf8');
const pkg = JSON.parse(await read('package.json')) as { version: string };
const V = pkg.version;

describe('one version', () => {
  it('package.json and package-lock.json say a plain X.Y.Z', async () => {
    expect(V).toMatch(/^\d+\.\d+\.\d+$/);
    const lock = JSON.parse(await read('package-lock.json')) as { version: string; packages: Record<string, { version?: string }> };
    expect(lock.version).toBe(V);
    expect(lock.packages['']?.version).toBe(V);
  });

  it('CHANGELOG: Unreleased on top, then this version dated, opening with the upgrade steps; versions descend', async () => {
    const log = await read('CHANGELOG.md');
    const heads = [...log.matchAll(/^## (.+)$/gm)].map((m) => m[1]!);
    expect(heads[0]).toBe('Unreleased');
    expect(heads[1]).toMatch(new RegExp(`^${V.replaceAll('.', '\\.')} — \\d{4}-\\d{2}-\\d{2}$`));
    const section = log.slice(log.indexOf(`## ${heads[1]}`), log.indexOf(`## ${heads[2]}`));
    expect(section.split('\n')[2]).toMatch(/^Upgrading from \d+\.\d+\.\d+/);
    expect(section).toContain('Compatibility:');
    const versions = heads.slice(1).map((h) => h.split(' ')[0]!.split('.').map(Number));
    for (let i = 1; i < versions.length; i++) {
      const [a, b] = [versions[i - 1]!, versions[i]!];
      expect(a[0]! * 1e6 + a[1]! * 1e3 + a[2]! > b[0]! * 1e6 + b[1]! * 1e3 + b[2]!, heads.join(' | ')).toBe(true);
    }
  });

  it("deploy/: the image's tag, the version labels and the Containerfile's default", async () => {
    const k = await read('deploy/kustomization.yaml');
    expect(k).toContain(`newTag: "${V}"`);
    const ds = await read('deploy/daemonset.yaml');
    for (const m of ds.matchAll(/ipam-shim:([0-9][^\s"]*)/g)) expect(m[1]).toBe(V);
    for (const text of [k, ds]) for (const m of text.matchAll(/app\.kubernetes\.io\/version: "([^"]*)"/g)) expect(m[1]).toBe(V);
    expect(await read('deploy/Containerfile')).toMatch(new RegExp(`^ARG VERSION=${V.replaceAll('.', '\\.')}$`, 'm'));
  });

  it('README and docs show this version in their image names and --version examples', async () => {
    const docs = ['README.md', ...(await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    for (const d of docs) {
      const text = await read(d);
      for (const m of text.matchAll(/ipam-shim[: ](\d+\.\d+\.\d+)\b/g)) expect(m[1], `${d}: ${m[0]}`).toBe(V);
    }
  });

  it('npm run image -- --tag NAME: a name without a tag gets the version; one with a tag or digest keeps it', () => {
    expect(imageName(undefined)).toBe(`localhost/ipam-shim:${V}`);
    expect(imageName('registry.example/ipam-shim')).toBe(`registry.example/ipam-shim:${V}`);
    expect(imageName('registry.example:5000/team/ipam-shim')).toBe(`registry.example:5000/team/ipam-shim:${V}`);
    expect(imageName('registry.example:5000/ipam-shim:dev')).toBe('registry.example:5000/ipam-shim:dev');
    expect(imageName('registry.example/ipam-shim@sha256:0123')).toBe('registry.example/ipam-shim@sha256:0123');
  });

  it('docs/releasing.md: the tag is vX.Y.Z, annotated, made by whoever releases', async () => {
    const doc = await read('docs/releasing.md');
    expect(doc).toContain('git tag -a "v$V"');
    expect(doc).toContain('git push origin "v$V"');
  });
});
