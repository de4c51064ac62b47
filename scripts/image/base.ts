// The image's base: a Debian bookworm root file system made here with mmdebstrap from Debian's archive (the
// machine's own apt sources), holding exactly what the image runs besides the single executable:
//   iproute2   ip (routes, neighbours, addresses, `ip netns exec`) and tc (the probe rewrite's BPF check)
//   nftables   nft (the IPv6 probe rewrite)
//   ebtables   ebtables-legacy, for nodes whose azure-vnet wrote legacy tables (read beside nft, docs/residue.md)
//   iptables   ebtables-nft, the `ebtables` the image runs (priority 20 over legacy's 10, Debian's default); the
//              residue code reads both backends wherever the kernel can hold their tables
//   libstdc++6 the embedded Node.js links it (and libgcc-s1, its dependency); glibc comes with the essential set
// nsenter (util-linux) is in the essential set. The official debian:12-slim path of deploy/Containerfile installs
// the same list (test/unit/deploy.test.ts holds the two together).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SUITE = 'bookworm';
/** The architectures an image is built for (Debian's names, which are also OCI's), and each one's multiarch triplet. */
export const ARCHES = { amd64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' } as const;
export type Arch = keyof typeof ARCHES;
/** What the image needs from Debian besides the essential set; see the header. */
export const BASE_PACKAGES = ['iproute2', 'nftables', 'iptables', 'ebtables', 'libstdc++6'] as const;
/** The packages deploy/Containerfile installs on the official slim base (libstdc++6 is already in it). */
export const TOOL_PACKAGES = BASE_PACKAGES.filter((p) => p !== 'libstdc++6');

/**
 * mmdebstrap arguments that shape the file system (sizes measured in docs/operations.md#the-image):
 * the essential set (no apt: nothing updates the image in place), merged /usr set up by mmdebstrap's hook (else
 * init-system-helpers pulls usrmerge and with it perl), and dpkg leaving out docs, man pages, translations and
 * glibc's charset converters (nothing here calls iconv; the copyright files stay).
 */
export function mmdebstrapShape(arch: Arch): string[] {
  return [
    `--architectures=${arch}`, // a foreign one runs its maintainer scripts under qemu (binfmt_misc, scripts/install-deps.sh)
    '--variant=essential',
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    ...[
      'path-exclude=/usr/share/doc/*',
      'path-include=/usr/share/doc/*/copyright',
      'path-exclude=/usr/share/man/*',
      'path-exclude=/usr/share/info/*',
      'path-exclude=/usr/share/lintian/*',
      'path-exclude=/usr/share/locale/*',
      'path-include=/usr/share/locale/locale.alias',
      `path-exclude=/usr/lib/${ARCHES[arch]}/gconv/*`,
    ].map((o) => `--dpkgopt=${o}`),
    // mmdebstrap already leaves apt's lists and archives empty; debconf's backups of its caches are build-time only.
    '--customize-hook=rm -f "$1"/var/cache/debconf/config.dat-old "$1"/var/cache/debconf/templates.dat-old',
  ];
}

interface Source {
  uris: string[];
  suites: string[];
  components: string[];
  signedBy?: string;
}

/**
 * The machine's Debian bookworm sources (deb822 `.sources` and one-line `.list` files under /etc/apt), reduced to
 * `main` of bookworm, bookworm-updates and bookworm-security, as one deb822 text for mmdebstrap. The mirror
 * is whatever the machine uses: nothing is hard-coded.
 */
export function debianSources(aptDir = '/etc/apt'): string {
  const files: string[] = [];
  if (existsSync(join(aptDir, 'sources.list'))) files.push(join(aptDir, 'sources.list'));
  const dir = join(aptDir, 'sources.list.d');
  if (existsSync(dir)) for (const f of readdirSync(dir).sort()) if (/\.(list|sources)$/.test(f)) files.push(join(dir, f));
  const sources = files.flatMap((f) => (f.endsWith('.sources') ? parseDeb822(readFileSync(f, 'utf8')) : parseOneLine(readFileSync(f, 'utf8'))));
  const wanted = new Set([SUITE, `${SUITE}-updates`, `${SUITE}-security`]);
  const stanzas = sources
    .map((s) => ({ ...s, suites: s.suites.filter((x) => wanted.has(x)) }))
    .filter((s) => s.suites.length > 0 && s.components.includes('main'))
    .map((s) =>
      [
        `Types: deb`,
        `URIs: ${s.uris.join(' ')}`,
        `Suites: ${s.suites.join(' ')}`,
        `Components: main`,
        ...(s.signedBy ? [`Signed-By: ${s.signedBy}`] : []),
      ].join('\n'),
    );
  if (!stanzas.some((s) => new RegExp(`^Suites:.*\\b${SUITE}\\b(?!-)`, 'm').test(s))) {
    throw new Error(`no Debian ${SUITE} main source in ${aptDir}/sources.list*: the base image is built from the machine's Debian mirror`);
  }
  return `${stanzas.join('\n\n')}\n`;
}

function parseDeb822(text: string): Source[] {
  const out: Source[] = [];
  for (const para of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last = '';
    for (const line of para.split('\n')) {
      if (line.startsWith('#')) continue;
      if (/^\s/.test(line) && last) fields.set(last, `${fields.get(last)} ${line.trim()}`);
      const m = /^([\w-]+):\s*(.*)$/.exec(line);
      if (m) fields.set((last = m[1]!.toLowerCase()), m[2]!.trim());
    }
    const words = (k: string) => (fields.get(k) ?? '').split(/\s+/).filter(Boolean);
    if (!words('types').includes('deb') || fields.get('enabled')?.toLowerCase() === 'no') continue;
    const signedBy = fields.get('signed-by');
    out.push({
      uris: words('uris'),
      suites: words('suites'),
      components: words('components'),
      ...(signedBy && !signedBy.includes('-----BEGIN') ? { signedBy } : {}),
    });
  }
  return out;
}

function parseOneLine(text: string): Source[] {
  const out: Source[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    const m = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const signedBy = /(?:^|\s)signed-by=(\S+)/.exec(m[1] ?? '')?.[1];
    out.push({ uris: [m[2]!], suites: [m[3]!], components: m[4]!.split(/\s+/), ...(signedBy ? { signedBy } : {}) });
  }
  return out;
}

/** The cache key of a base: everything that decides its contents (the sources name the mirror and suites). */
export function baseKey(sources: string, arch: Arch): string {
  return createHash('sha256')
    .update(JSON.stringify({ suite: SUITE, arch, packages: BASE_PACKAGES, shape: mmdebstrapShape(arch), sources }))
    .digest('hex')
    .slice(0, 12);
}

/** The full mmdebstrap argv that writes the base as a tarball to `target`. */
export function mmdebstrapArgs(sourcesFile: string, target: string, arch: Arch): string[] {
  return [...mmdebstrapShape(arch), `--include=${BASE_PACKAGES.join(',')}`, SUITE, target, sourcesFile];
}
