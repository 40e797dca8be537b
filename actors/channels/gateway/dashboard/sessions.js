// Sessions: the list, and one session's transcript as people read it (user, assistant, tool
// calls folded, compaction marked). Every text is shown as text.
import * as api from './api.js';
import { ago, badge, cut, fill, h, when } from './dom.js';

export async function sessions(root) {
  const { sessions: rows } = await api.get('/v1/sessions');
  rows.sort((a, b) => b.updated_ms - a.updated_ms);
  const now = Date.now();
  fill(root, h('h1', 'Sessions'), rows.length
    ? h('div.scroll', h('table', h('thead', h('tr', ['Session', 'Agent', 'State', 'Turns', 'Tokens in/out', 'Last run'].map((c) => h('th', c)))),
      h('tbody', rows.map((s) => h('tr', { dataset: { session: s.key } },
        h('td', h('a.mono', { href: `#/session/${encodeURIComponent(s.key)}` }, s.key)),
        h('td', s.agent), h('td', badge(s.state), s.queued ? ` +${s.queued}` : ''),
        h('td', String(s.turns)), h('td', `${s.tokens_in} / ${s.tokens_out}`),
        h('td', s.updated_ms ? `${ago(now - s.updated_ms)} ago` : '—'))))))
    : h('p.muted', 'No session yet.'));
}

export async function session(root, key) {
  const s = await api.get(`/v1/sessions/${encodeURIComponent(key)}`);
  const list = h('ol.transcript#transcript');
  for (const e of s.entries) {
    const item = entry(e);
    if (item) list.append(item);
  }
  fill(root, h('h1', 'Session'), h('p.mono', key), h('p', badge(s.state), ` ${s.entries.length} entries`),
    list.childElementCount ? list : h('p.muted', 'The transcript is empty.'));
}

function text(content) {
  if (content === null || content === undefined) return '';
  return typeof content === 'string' ? content : JSON.stringify(content);
}

function entry(e) {
  const stamp = h('time', when(e.ts));
  switch (e.type) {
    case 'message': {
      const m = e.message || {};
      if (m.role === 'system' || e.silent) return null;
      if (m.role === 'tool') {
        return h('li.msg.tool', h('details', h('summary', 'tool result ', h('span.mono', m.tool_call_id || '')),
          h('pre', cut(text(m.content), 4000))));
      }
      const calls = (m.tool_calls || []).map((c) => h('details.call', h('summary', 'calls ', h('strong', c.name)),
        h('pre', cut(c.arguments, 4000))));
      return h(`li.msg.${m.role === 'user' ? 'user' : 'assistant'}`, h('div.who', m.role, e.model ? ` · ${e.model}` : '', ' ', stamp),
        m.content ? h('div.text', text(m.content)) : '', calls, e.truncated ? h('p.muted', '(cut off by the output-token limit)') : '');
    }
    case 'compaction':
      if (!e.summary) {
        return h('li.msg.compaction', h('div.who', 'compaction ', stamp),
          h('p.muted', `older turns cut, the last messages kept (${e.tokens_before} tokens before)`));
      }
      return h('li.msg.compaction', h('div.who', 'compaction ', stamp),
        h('details', h('summary', `older turns summarised (${e.tokens_before} tokens before)`), h('div.text', text(e.summary))));
    case 'model_fell_over':
      return h('li.msg.note', `model ${e.from} → ${e.to}: ${cut(e.reason, 300)}`);
    case 'run_ended':
      return h('li.msg.note', `run ended ${e.outcome}: ${cut(e.reason, 300)}`);
    case 'run_resumed':
      return h('li.msg.note', `run resumed (attempt ${e.attempt})`);
    case 'unreadable':
      return h('li.msg.note', `unreadable line ${e.line}: ${cut(e.error, 200)}`);
    default:
      return null;
  }
}
