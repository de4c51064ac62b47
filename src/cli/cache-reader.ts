// The hidden entry of the runtime's result cache reader child (src/gc/cache-reader.ts starts this executable with
// CACHE_READER_ARG; src/main.ts dispatches it here): not an operator command, never listed.
export { cacheReaderMain, cacheReaderServe } from '../gc/cache-read.js';
