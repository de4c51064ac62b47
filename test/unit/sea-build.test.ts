// scripts/sea.mjs: how the build makes the single executable (shared with the bench's floor).
import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { SEA_EXEC_ARGV, injectBlob, withoutNoteNoise } from '../../scripts/sea.mjs';

// What postject 1.0.0-alpha.6 prints on stderr when injecting into Node 24.21.0's official linux-x64 binary.
const NOISE = [
  ...Array.from({ length: 5 }, () => "warning: Can't find string offset for section name '.note.100'"),
  "warning: Can't find string offset for section name '.note'",
  ...Array.from({ length: 3 }, () => "warning: Can't find string offset for section name '.note.100'"),
];

describe("postject's output (issue 37 item 10)", () => {
  it('drops exactly the nine note-section warnings', () => {
    expect(withoutNoteNoise(`${NOISE.join('\n')}\n`)).toBe('');
  });
  it('keeps every other line, in order, including near misses', () => {
    const other = [
      'Error: Could not find the sentinel NODE_SEA_FUSE',
      "warning: Can't find string offset for section name '.text'",
      "warning: Can't find string offset for section name '.note.100' (again)",
      'Injection done!',
    ];
    expect(withoutNoteNoise([other[0], NOISE[0], other[1], NOISE[5], other[2], other[3]].join('\n'))).toBe(other.join('\n'));
  });
});

describe('a failed injection', () => {
  it("fails the build with postject's own reason (it prints it on stdout)", () => {
    const postject = createRequire(import.meta.url).resolve('postject/dist/cli.js');
    expect(() => injectBlob(process.execPath, '/nonexistent/ipam-shim', '/nonexistent/sea-prep.blob', postject)).toThrow(
      /postject exited 1 injecting .*: .*Error: Can't read/s,
    );
  });
});

describe('the single executable flags', () => {
  it('are the ones the build stamps into the executable (and its --version shows)', () => {
    expect(SEA_EXEC_ARGV).toEqual(['--no-sparkplug', '--no-maglev']);
  });
});
