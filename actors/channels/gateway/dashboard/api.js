// The gateway's HTTP API, with the token from the tab's session storage on every call, and
// server-sent event streams read through fetch (EventSource cannot send the token header).

const KEY = 'clawbus.token';

/** The token of this tab, or null. */
export const token = () => sessionStorage.getItem(KEY);
export const setToken = (t) => sessionStorage.setItem(KEY, t);
export const clearToken = () => sessionStorage.removeItem(KEY);

/** An API error: the HTTP status and the gateway's `{error: {code, message}}`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${token() || ''}`, ...extra };
}

async function answer(res) {
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!res.ok) {
    const e = body && body.error;
    if (res.status === 401) window.dispatchEvent(new CustomEvent('clawbus:unauthorized', { detail: e }));
    throw new ApiError(res.status, e && e.code, (e && e.message) || `HTTP ${res.status}`);
  }
  return body;
}

/** GET `path` as JSON (or text). */
export async function get(path) {
  return answer(await fetch(path, { headers: headers(), cache: 'no-store' }));
}

/** POST `body` as JSON to `path`. */
export async function post(path, body = {}) {
  return answer(await fetch(path, {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify(body),
  }));
}

/**
 * Reads the SSE stream at `path`, calling `onEvent({id, event, data})` per event and `onOpen()`
 * each time the stream is (re)opened. A dropped stream reconnects (1 s, doubling to 10 s) until
 * `close()`; a stream the server ends (`done: true` from `onEvent` or a clean end) stays closed
 * unless `reopen` says otherwise. `pause()` drops the connection; `resume()` reopens it.
 */
export function stream(path, { onEvent, onOpen, onState, reopen = false }) {
  let ctrl = null;
  let closed = false;
  let paused = false;
  let delay = 1000;
  let timer = null;
  const state = (s) => onState && onState(s);

  async function run() {
    if (closed || paused) return;
    ctrl = new AbortController();
    const mine = ctrl;
    let ended = false;
    try {
      const res = await fetch(path, { headers: headers({ Accept: 'text/event-stream' }), signal: mine.signal, cache: 'no-store' });
      if (!res.ok) { await answer(res); return; }
      delay = 1000;
      state('live');
      if (onOpen) await onOpen();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let ev = { id: null, event: 'message', data: [] };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { ended = true; break; }
        buf += value;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          let line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (ev.data.length) {
              const data = ev.data.join('\n');
              let parsed = data;
              try { parsed = JSON.parse(data); } catch { /* plain text */ }
              if (onEvent({ id: ev.id, event: ev.event, data: parsed }) === 'done') { ended = true; mine.abort(); break; }
            }
            ev = { id: null, event: 'message', data: [] };
          } else if (line.startsWith(':')) {
            // a keep-alive comment
          } else {
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'data') ev.data.push(val);
            else if (field === 'event') ev.event = val;
            else if (field === 'id') ev.id = val;
          }
        }
        if (ended) break;
      }
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 404 || e.status === 400)) { closed = true; state('closed'); return; }
    }
    if (closed || paused || mine !== ctrl) return;
    if (ended && !reopen) { state('ended'); return; }
    state('reconnecting');
    timer = setTimeout(run, delay);
    delay = Math.min(delay * 2, 10000);
  }

  run();
  return {
    close() { closed = true; clearTimeout(timer); if (ctrl) ctrl.abort(); },
    pause() { paused = true; clearTimeout(timer); if (ctrl) ctrl.abort(); state('paused'); },
    resume() { if (!paused) return; paused = false; delay = 1000; run(); },
  };
}

/** Every open stream, so the header's live switch pauses and resumes them all. */
const open = new Set();
let livePaused = false;

/** Like `stream`, registered with the live switch; `close()` unregisters it. */
export function live(path, opts) {
  const s = stream(path, opts);
  if (livePaused) s.pause();
  open.add(s);
  const close = s.close;
  s.close = () => { open.delete(s); close(); };
  return s;
}

/** Pauses (drops) or resumes every live stream. */
export function setLive(on) {
  livePaused = !on;
  for (const s of open) { if (on) s.resume(); else s.pause(); }
}
export const isLive = () => !livePaused;

/** The Prometheus text of /metrics as [{name, labels, value}]. */
export async function metrics() {
  const text = await get('/metrics');
  const rows = [];
  for (const line of String(text).split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const p of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    rows.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return rows;
}
