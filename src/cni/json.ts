// The one test for "a JSON object" (not null, not an array) that config readers and editors share.

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
