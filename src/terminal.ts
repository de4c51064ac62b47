// What reaches an operator's terminal. Pod names, namespaces, container IDs, interface and file names come from
// outside (the runtime's CNI_ARGS, its result cache, the node's files): printed raw, ESC[2J would clear the
// screen, BEL ring, a newline forge a table row, a bidi override reorder what follows (issue 34, item 5).
// Every text printer of the CLI and doctor shows such a value through shown(); src/cli/index.ts passes its
// whole output through forTerminal() as well, so a value a printer missed still reaches no terminal raw.

/**
 * What a terminal would act on rather than show: C0 controls, DEL, C1 controls (U+0085, and U+009B, which
 * xterm reads as CSI), the line and paragraph separators, and the bidi marks, embeddings, overrides and isolates.
 */
const CONTROLS = '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069';
const EVERY_CONTROL = new RegExp(`[${CONTROLS}]`, 'g');
/** The same, but a newline and a tab, which a printer's own layout uses. */
const CONTROL_BUT_LAYOUT = new RegExp(`[${CONTROLS.replace('\\u0000-\\u001f', '\\u0000-\\u0008\\u000b-\\u001f')}]`, 'g');

/**
 * `\x1b` for a C0 control (as the JSON and C notations a reader knows), `\u202e` for the others: never a
 * character JSON keeps raw (a JSON document passed through stays exact JSON, the same value).
 */
const escapeChar = (c: string): string => {
  const n = c.charCodeAt(0);
  return n < 0x20 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
};

/** PURE: a value from outside as one line a terminal shows as it is: every control character escaped, newlines and tabs too. */
export const shown = (value: string): string => value.replace(EVERY_CONTROL, escapeChar);

/**
 * PURE: a whole output (text, or JSON.stringify's) with every control character escaped but its own newlines and
 * tabs. JSON.stringify escapes C0 controls itself and keeps the others raw; inside a JSON string `\u0085` is the
 * same character, so `--json` stays exact JSON.
 */
export const forTerminal = (text: string): string => text.replace(CONTROL_BUT_LAYOUT, escapeChar);
