// Overview: agents and their load, lanes, turns per minute and error rate, next cron fires,
// open circuit breakers. Refreshed on the live task feed (at most twice a second).
import * as api from './api.js';
import { badge, fill, h, svg, throttle, when } from './dom.js';

const FAILED = new Set(['failed', 'timed_out', 'dead_lettered']);
const ENDED = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'dead_lettered']);

export async function overview(root) {
  const agentsBox = h('section.card', h('h2', 'Agents'));
  const lanesBox = h('section.card', h('h2', 'Lanes'));
  const chartBox = h('section.card', h('h2', 'Turns per minute, last hour'));
  const cronBox = h('section.card', h('h2', 'Next cron fires'));
  const breakersBox = h('section.card', h('h2', 'Open circuit breakers'));
  fill(root, h('h1', 'Overview'), h('div.grid', agentsBox, lanesBox, chartBox, cronBox, breakersBox));

  async function refresh() {
    const [status, list, metrics] = await Promise.all([
      api.get('/v1/status'), api.get('/v1/tasks'), api.metrics().catch(() => []),
    ]);
    drawAgents(agentsBox, status.agents, list.tasks);
    drawLanes(lanesBox, metrics);
    drawChart(chartBox, list.tasks);
    drawBreakers(breakersBox, status.breakers);
  }
  async function refreshCron() {
    const { jobs } = await api.get('/v1/cron');
    drawCron(cronBox, jobs);
  }
  await Promise.all([refresh(), refreshCron()]);
  const again = throttle(() => { refresh().catch(() => {}); }, 500);
  const onEvent = (e) => {
    const t = e.detail && e.detail.event && e.detail.event.type;
    if (t && t !== 'delta' && t !== 'progress') again();
  };
  window.addEventListener('clawbus:task-event', onEvent);
  window.addEventListener('clawbus:resync', again);
  const cronTimer = setInterval(() => { refreshCron().catch(() => {}); }, 30000);
  return () => {
    window.removeEventListener('clawbus:task-event', onEvent);
    window.removeEventListener('clawbus:resync', again);
    clearInterval(cronTimer);
  };
}

function drawAgents(box, agents, tasks) {
  const rows = agents.map((a) => {
    const mine = tasks.filter((t) => t.agent === a.id);
    const running = mine.filter((t) => t.state === 'running').length;
    const queued = mine.filter((t) => t.state === 'queued').length;
    const state = running ? `running ${running}` : 'idle';
    return h('tr', { dataset: { agent: a.id } },
      h('td', h('a', { href: `#/tasks/agent=${encodeURIComponent(a.id)}` }, a.id)),
      h('td.agent-state', running ? badge('running') : badge('idle'), ' ', state, queued ? ` / queued ${queued}` : ''),
      h('td.mono', a.model));
  });
  fill(box, h('h2', 'Agents'), h('table', h('thead', h('tr', h('th', 'Agent'), h('th', 'State'), h('th', 'Model'))), h('tbody', rows)));
}

function drawLanes(box, metrics) {
  const lanes = {};
  for (const m of metrics) {
    if (!m.labels.lane) continue;
    const l = (lanes[m.labels.lane] ||= { active: 0, capacity: 0, queued: 0 });
    if (m.name === 'clawbus_lane_active') l.active = m.value;
    if (m.name === 'clawbus_lane_capacity') l.capacity = m.value;
    if (m.name === 'clawbus_lane_queued') l.queued = m.value;
  }
  const rows = Object.entries(lanes).sort().map(([name, l]) => {
    const pct = l.capacity ? Math.min(100, (100 * l.active) / l.capacity) : 0;
    const bar = h('div.bar', { role: 'meter', 'aria-valuenow': l.active, 'aria-valuemin': 0, 'aria-valuemax': l.capacity, 'aria-label': `lane ${name}` },
      h('div.fill'));
    bar.firstChild.style.width = `${pct}%`;
    return h('div.lane', { dataset: { lane: name } },
      h('span.lane-name', name), bar,
      h('span.lane-figures', `${l.active} / ${l.capacity}`, l.queued ? ` · ${l.queued} queued` : ''));
  });
  fill(box, h('h2', 'Lanes'), rows.length ? rows : h('p.muted', 'No lane metrics yet.'));
}

function drawChart(box, tasks) {
  const now = Date.now();
  const minute = 60000;
  const done = new Array(60).fill(0);
  const bad = new Array(60).fill(0);
  for (const t of tasks) {
    if (!ENDED.has(t.state)) continue;
    const i = 59 - Math.floor((now - t.updated_ms) / minute);
    if (i < 0 || i > 59) continue;
    done[i] += 1;
    if (FAILED.has(t.state)) bad[i] += 1;
  }
  const max = Math.max(1, ...done);
  const W = 300;
  const H = 80;
  const bw = W / 60;
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H + 12}`, class: 'chart', role: 'img', 'aria-label': 'turns per minute and error rate over the last hour' });
  done.forEach((n, i) => {
    if (!n) return;
    const bh = (n / max) * H;
    chart.append(svg('rect', { x: i * bw + 0.5, y: H - bh, width: bw - 1, height: bh, class: 'ok' }, svg('title', {}, `${n} turns`)));
    if (bad[i]) {
      const eh = (bad[i] / max) * H;
      chart.append(svg('rect', { x: i * bw + 0.5, y: H - eh, width: bw - 1, height: eh, class: 'err' }, svg('title', {}, `${bad[i]} failed`)));
    }
  });
  chart.append(svg('text', { x: 0, y: H + 11, class: 'axis' }, '−60 min'), svg('text', { x: W, y: H + 11, class: 'axis', 'text-anchor': 'end' }, 'now'));
  const total = done.reduce((a, b) => a + b, 0);
  const errors = bad.reduce((a, b) => a + b, 0);
  fill(box, h('h2', 'Turns per minute, last hour'), chart,
    h('p.muted', `${total} turns, ${total ? Math.round((100 * errors) / total) : 0}% failed (peak ${max}/min)`));
}

function drawCron(box, jobs) {
  const next = jobs.filter((j) => j.job.enabled !== false && j.state && j.state.next_fire_ms)
    .sort((a, b) => a.state.next_fire_ms - b.state.next_fire_ms).slice(0, 5);
  fill(box, h('h2', 'Next cron fires'), next.length
    ? h('ul.plain', next.map((j) => h('li', h('a', { href: '#/cron' }, j.job.name || j.job.id), ` → ${j.job.agent}: `,
      when(j.state.next_fire_ms, j.job.schedule && j.job.schedule.tz))))
    : h('p.muted', 'No cron job is scheduled.'));
}

function drawBreakers(box, breakers) {
  const open = breakers.filter((b) => b.state !== 'closed');
  fill(box, h('h2', 'Open circuit breakers'), open.length
    ? h('ul.plain', open.map((b) => h('li', badge(b.state), ` ${b.provider}: ${b.failures} failures`,
      b.retry_in_ms ? `, retry in ${Math.ceil(b.retry_in_ms / 1000)} s` : '')))
    : h('p.muted', 'None: every model provider is reachable.'));
}
