// The dashboard's shell: login, the views by URL hash, the live event feeds shared by the views.
import * as api from './api.js';
import { fill, h, toast } from './dom.js';
import { overview } from './overview.js';
import { tasks } from './tasks.js';
import { task } from './task.js';
import { sessions, session } from './sessions.js';
import { cron } from './cron.js';
import { approvals, refreshBadge } from './approvals.js';
import { chat } from './chat.js';
import { flows, flowRun } from './flows.js';
import { nodes } from './nodes.js';

const $ = (id) => document.getElementById(id);

/** Hash routes: `#/name/arg` → view(root, arg) returning an optional cleanup. */
const routes = {
  overview, tasks, task, sessions, session, cron, approvals, chat, flows, flow: flowRun, nodes,
};

let cleanup = null;
let feeds = [];

/** The shared feeds: every agent task event and every approval event, re-broadcast as DOM events. */
function startFeeds() {
  const emit = (name, detail) => window.dispatchEvent(new CustomEvent(name, { detail }));
  const onState = (s) => {
    const b = $('live');
    b.dataset.state = s;
    b.textContent = s === 'live' ? '● live' : s === 'paused' ? '○ paused' : '◌ reconnecting';
  };
  feeds = [
    api.live('/v1/bus/tail?pattern=events.agent.*', {
      reopen: true,
      onState,
      onOpen: () => emit('clawbus:resync'),
      onEvent: (e) => { if (e.data && e.data.payload) emit('clawbus:task-event', e.data.payload); },
    }),
    api.live('/v1/bus/tail?pattern=approvals.*', {
      reopen: true,
      // (Re)opened: what arrived while it was not open is read again.
      onOpen: () => { refreshBadge(); emit('clawbus:approval'); },
      onEvent: () => { refreshBadge(); emit('clawbus:approval'); },
    }),
  ];
}

function stopFeeds() {
  for (const f of feeds) f.close();
  feeds = [];
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* a view's own */ } cleanup = null; }
  const [name, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const view = routes[name] || overview;
  for (const a of document.querySelectorAll('#nav a')) {
    const on = a.getAttribute('href') === `#/${name || 'overview'}` || (name === 'task' && a.getAttribute('href') === '#/tasks');
    if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const root = fill($('view'));
  try {
    cleanup = (await view(root, rest.map(decodeURIComponent).join('/'))) || null;
  } catch (e) {
    if (!(e instanceof api.ApiError && e.status === 401)) fill(root, h('p.error', { role: 'alert' }, String(e.message || e)));
  }
}

function showLogin(message) {
  stopFeeds();
  $('top').hidden = true;
  fill($('view'));
  $('login').hidden = false;
  const err = $('login-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('token').focus();
}

function enter() {
  $('login').hidden = true;
  $('top').hidden = false;
  startFeeds();
  refreshBadge();
  route();
}

$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  api.setToken(t);
  try {
    await api.get('/v1/agents');
    $('token').value = '';
    enter();
  } catch (e) {
    api.clearToken();
    showLogin(e.status === 401
      ? 'Wrong token: the gateway refused it. Copy it from <state-dir>/gateway.token.'
      : `The gateway did not answer: ${e.message}`);
  }
});

window.addEventListener('clawbus:unauthorized', () => {
  if (!$('login').hidden) return; // the login form names a refused token itself
  api.clearToken();
  showLogin('The gateway no longer accepts this token. Log in again.');
});
$('logout').addEventListener('click', () => { api.clearToken(); showLogin(); });
$('live').addEventListener('click', () => {
  const on = !api.isLive();
  api.setLive(on);
  $('live').setAttribute('aria-pressed', String(on));
});
// The skip link moves the focus to the view, without a route change.
document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); $('main').focus(); });
window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (e) => toast(String(e.reason && e.reason.message || e.reason)));

if (api.token()) {
  api.get('/v1/agents').then(enter, (e) => showLogin(e.status === 401 ? 'Log in again.' : e.message));
} else {
  showLogin();
}
