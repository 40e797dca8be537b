// Nodes: the live nodes of the bus (one on the embedded bus), their agents, lanes and link to
// the server, from their heartbeats; refreshed every few seconds while shown.
import * as api from './api.js';
import { ago, badge, fill, h, when } from './dom.js';

const lanes = (ls) => h('ul.plain', ls.map((l) => h('li', { 'data-lane': l.name },
  `${l.name}: ${l.running}/${l.cap} running, ${l.waiting} waiting`)));

function link(bus) {
  if (!bus) return h('span.muted', 'embedded');
  const state = bus.connected ? 'connected' : `reconnecting (attempt ${bus.reconnect_attempt})`;
  return h('span', badge(bus.connected ? 'succeeded' : 'failed'), ` ${bus.server} ${state}`,
    bus.parked ? `, ${bus.parked} outcomes waiting` : '', bus.last_error ? ` — ${bus.last_error}` : '');
}

export async function nodes(root) {
  const box = h('div');
  fill(root, h('h1', 'Nodes'), box);
  async function draw() {
    const { nodes: list } = await api.get('/v1/nodes');
    list.sort((a, b) => String(a.node).localeCompare(String(b.node)));
    fill(box, list.length ? h('div.scroll', h('table#nodes', h('thead', h('tr', ['Node', 'Agents', 'Lanes', 'Bus', 'Up since', 'Last beat'].map((c) => h('th', c)))),
      h('tbody', list.map((n) => h('tr', { 'data-node': n.node },
        h('td.mono', n.node), h('td', n.agents.join(', ')), h('td', lanes(n.lanes || [])), h('td', link(n.bus)),
        h('td', when(n.started_ms)), h('td', `${ago(Math.max(0, Date.now() - n.beat_ms))} ago`)))))) : h('p.muted', 'No live node.'));
  }
  await draw();
  const timer = setInterval(() => { draw().catch(() => {}); }, 5000);
  return () => clearInterval(timer);
}
