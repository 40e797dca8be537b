// Flows: the flows of flows.d/ and their runs; one run with its nodes, live.
import * as api from './api.js';
import { ago, badge, shortId, fill, h, when } from './dom.js';

export async function flows(root) {
  const [{ flows: defs }, { runs }] = await Promise.all([api.get('/v1/flows'), api.get('/v1/flow-runs')]);
  runs.sort((a, b) => b.created_ms - a.created_ms);
  fill(root, h('h1', 'Flows'),
    h('section.card', h('h2', 'Flows'), defs.length ? h('ul.plain', defs.map((f) => h('li', h('strong', f.name), ` (${f.nodes.length ?? f.nodes} nodes) `, f.description || ''))) : h('p.muted', 'No flow in flows.d/.')),
    h('section.card', h('h2', 'Runs'), runs.length ? h('div.scroll', h('table', h('thead', h('tr', ['Run', 'Flow', 'State', 'Started', 'Took'].map((c) => h('th', c)))),
      h('tbody', runs.map((r) => h('tr', h('td', h('a.mono', { href: `#/flow/${r.id}` }, shortId(String(r.id)))), h('td', r.flow), h('td', badge(r.state)),
        h('td', when(r.created_ms)), h('td', r.ended_ms ? ago(r.ended_ms - r.created_ms) : '…')))))) : h('p.muted', 'No run yet.')));
}

export async function flowRun(root, id) {
  const box = h('div');
  fill(root, h('h1', 'Flow run ', h('span.mono', shortId(id))), box);
  async function draw() {
    const r = await api.get(`/v1/flow-runs/${encodeURIComponent(id)}`);
    fill(box, h('p', badge(r.state), ` ${r.flow}, started ${when(r.created_ms)}`),
      h('div.scroll', h('table', h('thead', h('tr', ['Node', 'Agent', 'State', 'Attempts', 'Took', 'Error'].map((c) => h('th', c)))),
        h('tbody', (r.nodes || []).map((n) => h('tr', h('td', n.id), h('td', n.agent || ''), h('td', badge(n.state)), h('td', String(n.attempts ?? '')),
          h('td', n.duration_ms ? ago(n.duration_ms) : ''), h('td', n.error || n.reason || '')))))));
  }
  await draw();
  const s = api.live(`/v1/flow-runs/${encodeURIComponent(id)}/events`, { onEvent: () => { draw().catch(() => {}); } });
  return () => s.close();
}
