// PURE: MAC addresses as ebtables and `ip` print them, normalised for comparison.

/** `a:b:c:d:e:f` with 1–2 hex digits per part → lowercase, zero-padded; anything else → undefined. */
export function normaliseMac(s: string): string | undefined {
  const parts = s.split(':');
  if (parts.length !== 6 || !parts.every((p) => /^[0-9a-fA-F]{1,2}$/.test(p))) return undefined;
  return parts.map((p) => p.toLowerCase().padStart(2, '0')).join(':');
}
