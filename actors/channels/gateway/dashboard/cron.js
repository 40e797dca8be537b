// Cron: jobs with their schedule in words and time zone, next fire, last runs; enable, disable,
// run now. Refreshed on cron events.
import * as api from './api.js';
import { ago, badge, shortId, button, fill, h, when } from './dom.js';

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** A schedule in words: "every 10 min", "every day at 09:00 (Europe/Paris)", "once at …". */
export function inWords(s) {
  if (!s) return '—';
  if (s.kind === 'every') return `every ${ago(s.every_ms)}`;
  if (s.kind === 'at') return `once at ${when(Date.parse(s.at) || s.at)}`;
  if (s.kind !== 'cron') return JSON.stringify(s);
  const tz = s.tz ? ` (${s.tz})` : ' (gateway time)';
  const f = String(s.expr).trim().split(/\s+/);
  if (f.length !== 5) return `cron ${s.expr}${tz}`;
  const [m, hr, dom, mon, dow] = f;
  const num = (x) => /^\d+$/.test(x);
  const at = num(m) && num(hr) ? `${hr.padStart(2, '0')}:${m.padStart(2, '0')}` : null;
  let words = null;
  if (/^\*\/\d+$/.test(m) && hr === '*' && dom === '*' && mon === '*' && dow === '*') words = `every ${m.slice(2)} minutes`;
  else if (num(m) && hr === '*' && dom === '*' && mon === '*' && dow === '*') words = `every hour at :${m.padStart(2, '0')}`;
  else if (at && dom === '*' && mon === '*' && dow === '*') words = `every day at ${at}`;
  else if (at && dom === '*' && mon === '*' && dow === '1-5') words = `on weekdays at ${at}`;
  else if (at && dom === '*' && mon === '*' && /^[0-6](,[0-6])*$/.test(dow)) words = `on ${dow.split(',').map((d) => DAYS[Number(d)]).join(', ')} at ${at}`;
  else if (at && num(dom) && mon === '*' && dow === '*') words = `on day ${dom} of every month at ${at}`;
  return `${words || 'cron'} · ${s.expr}${tz}`;
}

export async function cron(root) {
  const box = h('div#cron-jobs');
  fill(root, h('h1', 'Cron'), box);
  async function refresh() {
    const { jobs } = await api.get('/v1/cron');
    const runs = await Promise.all(jobs.map((j) => api.get(`/v1/cron/${encodeURIComponent(j.job.id)}/runs`).then((r) => r.runs, () => [])));
    fill(box, jobs.length ? jobs.map((j, i) => job(j, runs[i], refresh)) : h('p.muted', 'No cron job. Add one with `clawbus cron add` or POST /v1/cron.'));
  }
  await refresh();
  const timer = setInterval(() => { refresh().catch(() => {}); }, 15000);
  const onEvent = () => { refresh().catch(() => {}); };
  window.addEventListener('clawbus:resync', onEvent);
  return () => { clearInterval(timer); window.removeEventListener('clawbus:resync', onEvent); };
}

function job({ job: j, state: st }, runs, refresh) {
  const id = encodeURIComponent(j.id);
  const act = (verb) => async () => { await api.post(`/v1/cron/${id}/${verb}`); await refresh(); };
  const last = runs.slice(-5).reverse();
  return h('section.card.cron-job', { dataset: { job: j.id } },
    h('h2', j.name || j.id, ' ', badge(j.enabled === false ? 'disabled' : 'enabled')),
    h('p', `${j.agent}: `, inWords(j.schedule)),
    h('p', 'Next fire: ', st && st.next_fire_ms ? when(st.next_fire_ms, j.schedule && j.schedule.tz) : '—',
      st && st.failures ? ` · ${st.failures} failed in a row` : ''),
    h('p.actions',
      j.enabled === false ? button('Enable', act('enable'), '.enable') : button('Disable', act('disable'), '.disable'),
      ' ', button('Run now', act('run'), '.run')),
    last.length ? h('ul.plain.runs', last.map((r) => h('li', badge(r.outcome), ' ', when(r.started_ms), ` (${ago(r.ended_ms - r.started_ms)})`,
      r.task_id ? [' ', h('a.mono', { href: `#/task/${r.task_id}` }, shortId(String(r.task_id)))] : '',
      r.error ? ` ${r.error}` : ''))) : h('p.muted', 'No run yet.'));
}
