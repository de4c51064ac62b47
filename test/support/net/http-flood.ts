// Clients of the agent's HTTP ports that a hostile pod could be (issue 34, item 6; issue 45, items 4 and 5), and
// kubelet-like probes, as `node -e` scripts: each runs in a process of its own (under `ip netns exec` where the
// agent runs in a node netns), so the load is not the test's own event loop.

/**
 * argv: HOST PORT SOURCES(comma-separated) PER_SOURCE MODE. `PER_SOURCE` clients from each source address, each
 * reconnecting once closed; prints how many connections it made so far, every 500 ms. Modes: idle (sends
 * nothing), partial (half a request head: slowloris), pipeline (8,000 `GET /metrics` at once, never reads a
 * reply), trickle (4 more `GET /metrics` every 20 ms, never reads a reply).
 */
export const FLOOD = `
const net = require('node:net');
const [host, port, sources, perSource, mode] = [process.argv[1], Number(process.argv[2]), process.argv[3].split(','), Number(process.argv[4]), process.argv[5]];
const GET = 'GET /metrics HTTP/1.1\\r\\nHost: agent\\r\\n\\r\\n';
let connects = 0;
const client = (localAddress) => {
  let timer;
  const s = net.connect({ port, host, localAddress }, () => {
    connects++;
    if (mode === 'partial') s.write('GET /healthz HTTP/1.1\\r\\nHost: agent\\r\\n');
    if (mode === 'pipeline') s.write(GET.repeat(8000));
    if (mode === 'trickle') timer = setInterval(() => s.write(GET.repeat(4)), 20);
  });
  if (mode === 'pipeline' || mode === 'trickle') s.pause();
  s.on('error', () => {});
  s.on('close', () => {
    clearInterval(timer);
    setImmediate(() => client(localAddress));
  });
};
for (const src of sources) for (let i = 0; i < perSource; i++) client(src);
setInterval(() => process.stdout.write(connects + '\\n'), 500);
`;

/**
 * argv: HOST PORT PATH COUNT EVERY_MS. COUNT kubelet-like probes (a new connection each, GET PATH, 1 s timeout),
 * one every EVERY_MS; prints a JSON array of their statuses (or error codes) when all have ended.
 */
export const PROBES = `
const http = require('node:http');
const [host, port, path, count, every] = [process.argv[1], Number(process.argv[2]), process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const one = () => new Promise((resolve) => {
  const req = http.request({ host, port, path, agent: false, timeout: 1000 }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode));
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => resolve(e.code || e.message));
  req.end();
});
(async () => {
  const pending = [];
  for (let i = 0; i < count; i++) {
    pending.push(one());
    await new Promise((r) => setTimeout(r, every));
  }
  process.stdout.write(JSON.stringify(await Promise.all(pending)));
})();
`;
