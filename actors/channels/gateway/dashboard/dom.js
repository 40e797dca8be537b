// Small DOM helpers. Text from the gateway (model, tool and user text) only ever becomes a text
// node: `h` sets strings with textContent semantics, never markup.

/** An element: h('td#id.state', {title: 'x'}, 'text', child, ...). Strings become text nodes. */
export function h(spec, attrs, ...children) {
  const tag = /^[a-z0-9]*/i.exec(spec)[0];
  const id = /#([\w-]+)/.exec(spec);
  const classes = [...spec.matchAll(/\.([\w-]+)/g)].map((m) => m[1]);
  const el = document.createElement(tag || 'div');
  if (id) el.id = id[1];
  if (classes.length) el.className = classes.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
  } else if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** An SVG element with attributes. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** "3 s", "4 min", "2 h", "5 d" from milliseconds. */
export function ago(ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60e3) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 3600e3) return `${Math.round(ms / 60e3)} min`;
  if (ms < 86400e3) return `${Math.round(ms / 360e3) / 10} h`;
  return `${Math.round(ms / 8640e3) / 10} d`;
}

/** A local date and time from Unix ms, in `timeZone` when given. */
export function when(ms, timeZone) {
  if (!ms) return '—';
  try {
    return new Intl.DateTimeFormat(undefined, {
      dateStyle: 'short', timeStyle: 'medium', timeZone: timeZone || undefined,
    }).format(new Date(ms));
  } catch {
    return new Date(ms).toLocaleString();
  }
}

/** The part of a task id that tells tasks apart (UUIDv7s share their first, time-based digits). */
export const shortId = (id) => String(id).slice(-8);

/** A state badge. */
export function badge(state) {
  return h(`span.badge.s-${String(state).replace(/[^a-z_-]/gi, '')}`, String(state));
}

/** A button that runs `action`, disabled while it runs; errors go to `toast`. */
export function button(label, action, spec = '') {
  const b = h(`button${spec}`, { type: 'button' }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try { await action(); } catch (e) { toast(String(e.message || e)); } finally { b.disabled = false; }
  });
  return b;
}

/** A short message at the bottom of the page. */
export function toast(text) {
  const box = document.getElementById('toast');
  if (!box) return;
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 6000);
}

/** Text cut to `n` characters, with an ellipsis. */
export function cut(text, n = 400) {
  const s = typeof text === 'string' ? text : JSON.stringify(text);
  return s && s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : (s ?? '');
}

/** Calls `f` at most once per `ms`, the last call winning. */
export function throttle(f, ms) {
  let timer = null;
  let again = false;
  return function run() {
    if (timer) { again = true; return; }
    f();
    timer = setTimeout(() => { timer = null; if (again) { again = false; run(); } }, ms);
  };
}
