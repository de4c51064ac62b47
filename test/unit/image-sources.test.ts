// scripts/image/base.ts's debianSources: the base image comes from the mirror the machine's apt sources name,
// reduced to bookworm (+updates, +security) main; other repositories, suites and disabled entries are left out.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { baseKey, debianSources, mmdebstrapArgs } from '../../scripts/image/base.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function aptDir(files: Record<string, string>): Promise<string> {
  dir = await mkdtemp(join(tmpdir(), 'apt-'));
  await mkdir(join(dir, 'sources.list.d'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

describe('debianSources', () => {
  it("keeps the machine's bookworm main entries from deb822 files, drops other repositories and disabled ones", async () => {
    const d = await aptDir({
      'sources.list.d/debian.sources': [
        'Types: deb deb-src',
        '# a comment',
        'URIs: http://mirror.example/debian',
        'Suites: bookworm bookworm-updates bookworm-backports',
        'Components: main contrib',
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
        '',
        'Types: deb',
        'URIs: http://mirror.example/debian-security',
        'Suites: bookworm-security',
        'Components: main',
        '',
        'Types: deb',
        'Enabled: no',
        'URIs: http://disabled.example/debian',
        'Suites: bookworm',
        'Components: main',
        '',
      ].join('\n'),
      'sources.list.d/nodesource.sources': 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n',
      'sources.list.d/other.sources.disabled': 'Types: deb\nURIs: http://ignored.example/debian\nSuites: bookworm\nComponents: main\n',
    });
    expect(debianSources(d)).toBe(
      [
        'Types: deb',
        'URIs: http://mirror.example/debian',
        'Suites: bookworm bookworm-updates',
        'Components: main',
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
        '',
        'Types: deb',
        'URIs: http://mirror.example/debian-security',
        'Suites: bookworm-security',
        'Components: main',
        '',
      ].join('\n'),
    );
  });

  it('reads one-line sources.list entries, signed-by included', async () => {
    const d = await aptDir({
      'sources.list':
        '# deb http://commented.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\ndeb-src http://mirror.example/debian bookworm main\ndeb http://ppa.example/x jammy main\n',
    });
    expect(debianSources(d)).toBe('Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\nSigned-By: /k.gpg\n');
  });

  it('refuses when no source has bookworm itself: the base is never built from somewhere else', async () => {
    const d = await aptDir({
      'sources.list': 'deb http://mirror.example/debian bookworm-security main\ndeb http://mirror.example/debian trixie main\n',
    });
    expect(() => debianSources(d)).toThrow(/no Debian bookworm main source/);
  });

  it('the cache key changes with the sources and with the architecture', () => {
    expect(baseKey('a', 'amd64')).not.toBe(baseKey('b', 'amd64'));
    expect(baseKey('a', 'amd64')).toBe(baseKey('a', 'amd64'));
    expect(baseKey('a', 'arm64')).not.toBe(baseKey('a', 'amd64'));
  });

  it("mmdebstrap gets the architecture, and drops that architecture's gconv modules", () => {
    const args = mmdebstrapArgs('/s', '/t.tar', 'arm64');
    expect(args).toContain('--architectures=arm64');
    expect(args).toContain('--dpkgopt=path-exclude=/usr/lib/aarch64-linux-gnu/gconv/*');
    expect(mmdebstrapArgs('/s', '/t.tar', 'amd64')).toContain('--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*');
  });
});
