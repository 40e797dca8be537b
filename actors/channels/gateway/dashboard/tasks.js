// Tasks: the live list with filters by state and agent, and the dead letters.
import * as api from './api.js';
import { ago, badge, shortId, button, fill, h, throttle } from './dom.js';

const STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'dead_lettered'];
const ENDED = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'dead_lettered']);

/** One task row, shared with the task page's tree. */
export function taskCells(t, now = Date.now()) {
  const end = ENDED.has(t.state) ? t.updated_ms : now;
  return [
    h('td', badge(t.state)),
    h('td', t.agent || '—'),
    h('td', h('a.mono', { href: `#/task/${t.task_id}` }, shortId(t.task_id))),
    h('td', ago(now - t.created_ms)),
    h('td', ago(end - t.created_ms)),
    h('td', String(t.attempts ?? '')),
  ];
}

export async function tasks(root, arg) {
  const params = new URLSearchParams(arg || '');
  const { agents } = await api.get('/v1/agents');
  const stateSel = h('select#f-state', { 'aria-label': 'state' }, h('option', { value: '' }, 'any state'),
    STATES.map((s) => h('option', { value: s }, s)));
  const agentSel = h('select#f-agent', { 'aria-label': 'agent' }, h('option', { value: '' }, 'any agent'),
    agents.map((a) => h('option', { value: a.id }, a.id)));
  stateSel.value = params.get('state') || '';
  agentSel.value = params.get('agent') || '';
  const body = h('tbody#task-rows');
  const dead = h('section.card#dead-letters');
  fill(root, h('h1', 'Tasks'),
    h('div.filters', h('label', 'State ', stateSel), h('label', 'Agent ', agentSel)),
    h('div.scroll', h('table.tasks', h('thead', h('tr', ['State', 'Agent', 'Task', 'Age', 'Duration', 'Attempts'].map((c) => h('th', c)))), body)),
    dead);

  let rows = new Map();
  function draw() {
    const now = Date.now();
    const shown = [...rows.values()]
      .filter((t) => !stateSel.value || t.state === stateSel.value)
      .filter((t) => !agentSel.value || t.agent === agentSel.value)
      .sort((a, b) => b.created_ms - a.created_ms)
      .slice(0, 500);
    fill(body, shown.map((t) => h('tr', { dataset: { task: t.task_id, state: t.state } }, taskCells(t, now))));
    const letters = [...rows.values()].filter((t) => t.state === 'dead_lettered');
    fill(dead, h('h2', `Dead letters (${letters.length})`), letters.length
      ? h('ul.plain', letters.map((t) => h('li', h('a.mono', { href: `#/task/${t.task_id}` }, shortId(t.task_id)),
        ` ${t.agent || ''}: ${t.error || ''} `, button('Retry', async () => { await api.post(`/v1/tasks/${t.task_id}/retry`); refresh(); }, '.retry'))))
      : h('p.muted', 'None.'));
  }
  async function refresh() {
    const list = await api.get('/v1/tasks');
    rows = new Map(list.tasks.map((t) => [t.task_id, t]));
    draw();
  }
  const onFilter = () => {
    const q = new URLSearchParams();
    if (stateSel.value) q.set('state', stateSel.value);
    if (agentSel.value) q.set('agent', agentSel.value);
    history.replaceState(null, '', `#/tasks${q.toString() ? '/' + q : ''}`);
    draw();
  };
  stateSel.addEventListener('change', onFilter);
  agentSel.addEventListener('change', onFilter);
  await refresh();
  const again = throttle(() => { refresh().catch(() => {}); }, 300);
  const onEvent = (e) => {
    const ev = e.detail;
    const type = ev && ev.event && ev.event.type;
    const known = rows.get(ev.task_id);
    if (known && type === 'started') { known.state = 'running'; known.attempts = ev.event.attempt; draw(); }
    if (known && type === 'terminal') { known.state = ev.event.outcome && ev.event.outcome.state || known.state; draw(); }
    if (type && type !== 'delta' && type !== 'progress') again();
  };
  window.addEventListener('clawbus:task-event', onEvent);
  window.addEventListener('clawbus:resync', again);
  const ticker = setInterval(draw, 5000);
  return () => {
    window.removeEventListener('clawbus:task-event', onEvent);
    window.removeEventListener('clawbus:resync', again);
    clearInterval(ticker);
  };
}
