// Which spec version a runtime sends a list's plugins, and whether the plugins of the list take it. Pure: the
// answers come from effects/plugin-versions.ts (each plugin's VERSION); install, doctor and the agent judge with
// this one rule. A list whose first plugin refuses its version fails every ADD before the shim is called (the real
// cilium-cni 1.17 answers a 1.1.0 config with code 1 "incompatible CNI versions"), so install must not chain into it.
import { compareVersions, SUPPORTED_VERSIONS } from './versions.js';

/** The newest spec libcni 1.3 implements: libcni ≥ 1.2 drops every version above it from cniVersions. */
const LIBCNI_MAX = '1.1.0';

/**
 * The versions a runtime may send the list's plugins. libcni < 1.2 (containerd 1.6/1.7, podman 4) reads
 * `cniVersion` as written; libcni ≥ 1.2 (containerd 2.x, CRI-O ≥ 1.30) takes, when `cniVersions` is there, the
 * highest of `cniVersion` ∪ `cniVersions` that is not above its own (LIBCNI_MAX). Both may meet one node's list.
 */
function versionsSent(list: Record<string, unknown>): { written: string | undefined; picked: string | undefined } {
  const written = typeof list.cniVersion === 'string' && list.cniVersion !== '' ? list.cniVersion : undefined;
  if (!Array.isArray(list.cniVersions)) return { written, picked: written };
  const candidates = [written, ...list.cniVersions].filter(
    (v): v is string => typeof v === 'string' && /^\d+\.\d+\.\d+$/.test(v) && compareVersions(v, LIBCNI_MAX) <= 0,
  );
  return { written, picked: candidates.sort(compareVersions).at(-1) ?? written };
}

/** What one plugin of the list answered to VERSION, or why it could not be asked. */
export type PluginAnswer = { type: string; path: string; versions: string[] } | { type: string; path?: string; versions?: undefined; why: string };

/** The list against its plugins' answers. */
export interface ListVerdict {
  /** refused: a plugin answered and does not take a version the runtime sends; not-asked: some plugin could not be asked (and none refused); taken: every plugin takes it. */
  state: 'taken' | 'refused' | 'not-asked';
  written: string | undefined;
  picked: string | undefined;
  refused: Array<{ type: string; path: string; versions: string[]; refuses: string[] }>;
  notAsked: Array<{ type: string; why: string }>;
  /** The highest version the shim and every plugin that answered take; undefined when there is none. */
  use: string | undefined;
  /** One line for an operator (install's refusal, doctor's finding, /readyz's reason). */
  message: string;
}

const upTo = (versions: readonly string[]): string => {
  const top = [...versions].sort(compareVersions).at(-1);
  return top ? `up to ${top} (${versions.join(', ')})` : 'no version';
};

/** Judges `list` against the answers of its plugins other than the shim (the shim's own versions are SUPPORTED_VERSIONS). */
export function judgeListVersions(list: Record<string, unknown>, answers: readonly PluginAnswer[]): ListVerdict {
  const { written, picked } = versionsSent(list);
  const sent = [...new Set([written, picked].filter((v): v is string => v !== undefined))];
  const refused = answers.flatMap((a) => {
    if (!a.versions) return [];
    const refuses = sent.filter((v) => !a.versions.includes(v));
    return refuses.length ? [{ type: a.type, path: a.path, versions: a.versions, refuses }] : [];
  });
  const notAsked = answers.flatMap((a) => (a.versions ? [] : [{ type: a.type, why: a.why }]));
  const use = [...SUPPORTED_VERSIONS]
    .filter((v) => answers.every((a) => !a.versions || a.versions.includes(v)))
    .sort(compareVersions)
    .at(-1);
  const listAt =
    written === picked || picked === undefined
      ? `the list is at ${written ?? '(no cniVersion)'}`
      : `the list says cniVersion ${written ?? '(none)'} and libcni ≥ 1.2 picks ${picked} from its cniVersions`;
  let message: string;
  if (refused.length) {
    const who = refused.map((r) => `${r.type} (${r.path}) supports ${upTo(r.versions)}`).join('; ');
    const fix = use
      ? `use cniVersion "${use}"${Array.isArray(list.cniVersions) ? ` with nothing above ${use} in cniVersions` : ''}`
      : 'no version is taken by every plugin of the list';
    message = `${who}; ${listAt}: every ADD fails with "incompatible CNI versions" before the shim runs; ${fix}`;
  } else if (notAsked.length) {
    message = `could not ask ${notAsked.map((n) => `${n.type} (${n.why})`).join('; ')} its VERSION: whether it takes ${sent.join(' and ') || 'the list'} is not known`;
  } else {
    message = `${answers.map((a) => a.type).join(', ') || 'no plugin besides the shim'} take${answers.length === 1 ? 's' : ''} ${sent.join(' and ')}`;
  }
  return { state: refused.length ? 'refused' : notAsked.length ? 'not-asked' : 'taken', written, picked, refused, notAsked, use, message };
}
