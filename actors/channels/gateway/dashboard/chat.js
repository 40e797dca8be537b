// Chat: talk to any agent in a named session, the answer streaming in as the model writes.
import * as api from './api.js';
import { fill, h, toast } from './dom.js';

export async function chat(root) {
  const { agents } = await api.get('/v1/agents');
  const agentSel = h('select#chat-agent', { 'aria-label': 'agent' }, agents.map((a) => h('option', { value: a.id }, a.id)));
  const sessionIn = h('input#chat-session', { value: 'dashboard', 'aria-label': 'session name', pattern: '[A-Za-z0-9._@+-]{1,128}' });
  const text = h('textarea#chat-text', { rows: 3, 'aria-label': 'message', placeholder: 'Message (Ctrl+Enter sends)' });
  const log = h('ol.transcript#chat-log', { 'aria-live': 'polite' });
  const send = h('button#chat-send', { type: 'submit' }, 'Send');
  const form = h('form.chat', h('div.filters', h('label', 'Agent ', agentSel), h('label', 'Session ', sessionIn)), text, send);
  fill(root, h('h1', 'Chat'), log, form);
  let current = null;
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const message = text.value.trim();
    if (!message) return;
    send.disabled = true;
    try {
      const t = await api.post(`/v1/agents/${encodeURIComponent(agentSel.value)}/tasks`, { text: message, session: sessionIn.value.trim() || undefined });
      text.value = '';
      log.append(h('li.msg.user', h('div.who', 'you → ', agentSel.value), h('div.text', message)));
      const out = h('div.text');
      const state = h('div.who', agentSel.value, ' · ', h('a', { href: `#/task/${t.task_id}` }, 'task'));
      log.append(h('li.msg.assistant', state, out));
      let answer = '';
      let seen = 0;
      if (current) current.close();
      current = api.live(`/v1/tasks/${t.task_id}/events`, {
        onEvent: (e) => {
          const ev2 = e.data;
          if (!ev2 || ev2.seq <= seen) return undefined;
          seen = ev2.seq;
          const k = ev2.event || {};
          if (k.type === 'delta') answer += k.text;
          if (k.type === 'reset') answer = '';
          if (k.type === 'terminal') {
            const o = k.outcome || {};
            if (o.state === 'succeeded') answer = (o.result && (o.result.text ?? JSON.stringify(o.result))) || answer;
            else answer = `${answer}\n[${o.state}: ${o.error || o.reason || ''}]`;
          }
          out.textContent = answer;
          return undefined;
        },
      });
    } catch (e) {
      toast(e.message);
    } finally {
      send.disabled = false;
    }
  });
  text.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });
  return () => { if (current) current.close(); };
}
