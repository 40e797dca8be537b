// One task: its tree of children across agents, a timeline, its events live (in order, once
// each, also across reconnects: the stream replays from the start and rows already shown by
// `seq` are skipped), the tool calls with their arguments, cancel and retry.
import * as api from './api.js';
import { ago, badge, shortId, button, cut, fill, h, svg, throttle, when } from './dom.js';

/** How many characters of a tool call's arguments an event row shows. */
const ARGS_SHOWN = 160;
const ENDED = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'dead_lettered']);

export async function task(root, id) {
  const head = h('section.card#task-head');
  const treeBox = h('section.card#task-tree', h('h2', 'Tree'));
  const timeBox = h('section.card#task-timeline', h('h2', 'Timeline'));
  const toolsBox = h('section.card#task-tools', h('h2', 'Tool calls'));
  const answer = h('pre.answer#task-answer');
  const events = h('ol.events#task-events', { 'aria-live': 'polite' });
  fill(root, h('h1', 'Task ', h('span.mono', shortId(id))), head,
    h('div.grid2', treeBox, timeBox),
    h('section.card', h('h2', 'Answer so far'), answer),
    h('section.card', h('h2', 'Events'), events),
    toolsBox);

  let view = await api.get(`/v1/tasks/${encodeURIComponent(id)}`);
  let tree = [];
  // The buttons stay put across refreshes (a click or the keyboard focus is never lost).
  const info = h('div');
  const cancel = button('Cancel', async () => {
    await api.post(`/v1/tasks/${id}/cancel`).catch((e) => { if (e.status !== 409) throw e; });
    await refresh();
  }, '#cancel.danger');
  const retry = button('Retry', async () => { await api.post(`/v1/tasks/${id}/retry`); await refresh(); }, '#retry');
  fill(head, info, h('p.actions', cancel, ' ', retry));
  function drawHead() {
    cancel.hidden = ENDED.has(view.state);
    retry.hidden = !['failed', 'dead_lettered'].includes(view.state);
    fill(info, h('p', badge(view.state), ' ', h('strong', view.agent || view.lane || ''), ' · lane ', view.lane || 'main',
      view.session ? [' · session ', h('a', { href: `#/session/${encodeURIComponent(view.session)}` }, view.session)] : ''),
    view.error ? h('p.error', view.error) : '');
  }
  async function refresh() {
    const [v, t] = await Promise.all([api.get(`/v1/tasks/${id}`), api.get(`/v1/tasks/${id}/tree`)]);
    view = v;
    tree = t.tree;
    drawHead();
    drawTree(treeBox, tree);
    drawTimeline(timeBox, tree);
  }
  // The transcript holding this task's turn: its routed session, else a one-off API task's own.
  async function refreshTools() {
    const keys = [view.session, view.agent && `agent:${view.agent}:api:task:${view.request_id}`].filter(Boolean);
    for (const key of keys) {
      try {
        const s = await api.get(`/v1/sessions/${encodeURIComponent(key)}`);
        drawTools(toolsBox, s.entries.filter((e) => e.request_id === view.request_id), key);
        return;
      } catch (e) {
        if (e.status !== 404 && e.status !== 400) throw e;
      }
    }
    fill(toolsBox, h('h2', 'Tool calls'), h('p.muted', 'No transcript found for this task.'));
  }
  await refresh();
  refreshTools().catch(() => {});

  // The events of this task, deduplicated by seq.
  let lastSeq = 0;
  let text = '';
  const stream = api.live(`/v1/tasks/${encodeURIComponent(id)}/events`, {
    onEvent: (e) => {
      const ev = e.data;
      if (!ev || typeof ev.seq !== 'number' || ev.seq <= lastSeq) return undefined;
      lastSeq = ev.seq;
      const k = ev.event || {};
      if (k.type === 'delta') text += k.text;
      if (k.type === 'reset') text = '';
      answer.textContent = text;
      events.append(h('li', { dataset: { seq: ev.seq, type: k.type } },
        h('span.seq', `#${ev.seq}`), ' ', h('span.type', k.type), ' ', describe(k)));
      if (k.type === 'tool_end' || k.type === 'terminal') refreshTools().catch(() => {});
      if (k.type !== 'delta' && k.type !== 'progress') again();
      return undefined;
    },
  });
  const again = throttle(() => { refresh().catch(() => {}); }, 300);
  const ids = () => new Set(tree.map((n) => n.task.task_id));
  const onEvent = (e) => {
    const type = e.detail && e.detail.event && e.detail.event.type;
    if (!type || type === 'delta' || type === 'progress') return;
    if (type === 'queued' || ids().has(e.detail.task_id)) again();
  };
  window.addEventListener('clawbus:task-event', onEvent);
  window.addEventListener('clawbus:resync', again);
  return () => {
    stream.close();
    window.removeEventListener('clawbus:task-event', onEvent);
    window.removeEventListener('clawbus:resync', again);
  };
}

function describe(k) {
  switch (k.type) {
    case 'queued': return '';
    case 'started': return `attempt ${k.attempt}`;
    case 'model_call': return `iteration ${k.iteration}`;
    case 'delta': return cut(k.text, 200);
    case 'reset': return k.reason;
    case 'tool_start': return [`${k.name} (${k.call_id}) `, args(k.arguments)];
    case 'tool_end': return `${k.name} ${k.ok ? 'ok' : 'failed'}`;
    case 'retry': return `attempt ${k.attempt} in ${ago(k.delay_ms)}: ${cut(k.reason, 300)}`;
    case 'progress': return cut(k.note, 200);
    case 'terminal': {
      const o = k.outcome || {};
      return [badge(o.state), ' ', cut(o.error || o.reason || (o.result && (o.result.text ?? o.result)) || '', 300)];
    }
    case 'delivered': return `${k.target} after ${k.attempts}`;
    case 'delivery_failed': return `${k.target}: ${cut(k.reason, 300)}`;
    default: return cut(k, 200);
  }
}

/** A tool call's arguments as the event carries them, cut to a line (as text; whole in the title). */
function args(text) {
  if (typeof text !== 'string') return '';
  return h('code.args', { title: text }, cut(text, ARGS_SHOWN));
}

function drawTree(box, nodes) {
  const list = h('ul.tree', { role: 'tree', 'aria-label': 'task tree' });
  for (const n of nodes) {
    const t = n.task;
    const li = h('li', { role: 'treeitem', 'aria-level': n.depth + 1, dataset: { task: t.task_id, agent: t.agent || '', state: t.state, depth: n.depth } },
      n.depth ? h('span.branch', '└ ') : '',
      h('strong', t.agent || t.lane || '?'), ' ', badge(t.state), ' ',
      h('a.mono', { href: `#/task/${t.task_id}` }, shortId(t.task_id)),
      t.attempts > 1 ? ` · ${t.attempts} attempts` : '');
    li.style.paddingLeft = `${n.depth * 1.4}em`;
    list.append(li);
  }
  fill(box, h('h2', `Tree (${nodes.length})`), list);
}

function drawTimeline(box, nodes) {
  const now = Date.now();
  const start = Math.min(...nodes.map((n) => n.task.created_ms));
  const end = Math.max(...nodes.map((n) => (ENDED.has(n.task.state) ? n.task.updated_ms : now)), start + 1);
  const W = 300;
  const row = 14;
  const chart = svg('svg', { viewBox: `0 0 ${W} ${nodes.length * row + 12}`, class: 'timeline', role: 'img', 'aria-label': 'timeline of the tree' });
  nodes.forEach((n, i) => {
    const t = n.task;
    const from = ((t.created_ms - start) / (end - start)) * W;
    const to = (((ENDED.has(t.state) ? t.updated_ms : now) - start) / (end - start)) * W;
    chart.append(svg('rect', { x: from, y: i * row + 2, width: Math.max(2, to - from), height: row - 4, class: `s-${t.state}` },
      svg('title', {}, `${t.agent}: ${t.state}, ${ago(to - from === 0 ? 0 : ((to - from) / W) * (end - start))}`)));
    chart.append(svg('text', { x: Math.min(from + 2, W - 40), y: i * row + row - 4, class: 'label' }, t.agent || ''));
  });
  chart.append(svg('text', { x: 0, y: nodes.length * row + 11, class: 'axis' }, when(start)),
    svg('text', { x: W, y: nodes.length * row + 11, class: 'axis', 'text-anchor': 'end' }, `+${ago(end - start)}`));
  fill(box, h('h2', 'Timeline'), chart);
}

function drawTools(box, entries, key) {
  const results = new Map();
  for (const e of entries) {
    if (e.type === 'message' && e.message.role === 'tool') results.set(e.message.tool_call_id, e.message.content);
  }
  const calls = entries.flatMap((e) => (e.type === 'message' && e.message.tool_calls) || []);
  fill(box, h('h2', `Tool calls (${calls.length})`),
    h('p.muted', 'From session ', h('a.mono', { href: `#/session/${encodeURIComponent(key)}` }, key)),
    calls.length
    ? h('ul.plain', calls.map((c) => h('li', h('details', h('summary', h('strong', c.name), ' ', h('span.mono', cut(c.arguments, 120))),
      h('p', 'Arguments'), h('pre', cut(c.arguments, 4000)),
      h('p', 'Result'), h('pre', results.has(c.id) ? cut(results.get(c.id), 2000) : '(none yet)')))))
    : h('p.muted', 'None.'));
}
