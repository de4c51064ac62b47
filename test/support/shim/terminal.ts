// What a test checks in text meant for an operator's terminal (src/terminal.ts is what makes it so).

/**
 * The characters a terminal acts on rather than shows (C0, DEL, C1, the line separators, the bidi controls), as
 * code points, the output's own layout characters (`layout`: its newlines, and tabs where it has them) aside.
 * Written out here rather than taken from src/terminal.ts, so that a test does not check the code with itself.
 */
export const rawControls = (text: string, layout = '\n'): string[] =>
  [...text]
    .filter((c) => !layout.includes(c))
    .map((c) => c.codePointAt(0)!)
    .filter(
      (n) =>
        n < 0x20 || (n >= 0x7f && n <= 0x9f) || [0x61c, 0x200e, 0x200f].includes(n) || (n >= 0x2028 && n <= 0x202e) || (n >= 0x2066 && n <= 0x2069),
    )
    .map((n) => `U+${n.toString(16).padStart(4, '0')}`);
