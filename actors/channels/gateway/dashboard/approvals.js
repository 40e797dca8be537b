// Approvals: pending exec requests with the exact argv (one item per word, as text), the agent,
// its task (a link to the task page) and session; allow, deny, always. The header's badge counts them (silently) as they arrive.
import * as api from './api.js';
import { ago, badge, button, fill, h, shortId, when } from './dom.js';

/** Updates the header's count of pending approvals. */
export async function refreshBadge() {
  const el = document.getElementById('approvals-badge');
  if (!el) return;
  try {
    const { approvals } = await api.get('/v1/approvals?state=pending');
    el.textContent = String(approvals.length);
    el.hidden = approvals.length === 0;
    el.setAttribute('aria-label', `${approvals.length} pending`);
  } catch { /* the next event tries again */ }
}

/** The argv as a numbered list, each word its own item (as text). */
function argvList(argv) {
  if (!Array.isArray(argv) || !argv.length) return '';
  return h('ol.argv', { start: 0, 'aria-label': 'argv' }, argv.map((w) => h('li', h('code', String(w)))));
}

export async function approvals(root) {
  const list = h('div');
  const empty = h('p.muted', 'Nothing waits for an answer.');
  const box = h('div#approvals', list, empty);
  const done = h('div#approvals-done');
  const cards = new Map();
  fill(root, h('h1', 'Approvals'), box, h('h2', 'Answered lately'), done);
  async function refresh() {
    const { approvals: all } = await api.get('/v1/approvals');
    const pending = all.filter((a) => a.state === 'pending');
    const now = Date.now();
    const answer = (a, decision, always) => async () => {
      await api.post(`/v1/approvals/${encodeURIComponent(a.id)}`, { decision, always });
      await refresh();
      refreshBadge();
    };
    // Cards are kept by id: one that stays pending is not redrawn under the user's pointer.
    for (const [aid, card] of cards) {
      if (!pending.some((a) => a.id === aid)) { card.remove(); cards.delete(aid); }
    }
    for (const a of pending) {
      if (cards.has(a.id)) continue;
      const card = h('section.card.approval', { dataset: { approval: a.id } },
        h('p', h('strong.agent', a.agent), ' asks to run',
          a.task_id ? [' (task ', h('a.task-link.mono', { href: `#/task/${encodeURIComponent(a.task_id)}`, title: a.task_id }, shortId(a.task_id)), ')'] : '',
          ' in session ', h('span.mono', a.session), ':'),
        argvList(a.argv),
        h('pre.command', { title: 'the command line' }, a.command),
        h('p.muted', `asked ${ago(now - a.created_ms)} ago, expires ${when(a.expires_ms)}`),
        h('p.actions', button('Allow', answer(a, 'allow', false), '.allow'), ' ',
          button('Always allow', answer(a, 'allow', true), '.always'), ' ',
          button('Deny', answer(a, 'deny', false), '.deny.danger')));
      cards.set(a.id, card);
      list.append(card);
    }
    empty.hidden = pending.length > 0;
    fill(done, h('ul.plain', all.filter((a) => a.state !== 'pending').slice(0, 20).map((a) => h('li', badge(a.state), ' ', h('strong', a.agent), ' ',
      h('span.mono', a.command), a.always ? ' (always)' : ''))));
  }
  await refresh();
  const on = () => { refresh().catch(() => {}); };
  window.addEventListener('clawbus:approval', on);
  window.addEventListener('clawbus:resync', on);
  return () => { window.removeEventListener('clawbus:approval', on); window.removeEventListener('clawbus:resync', on); };
}
