// Floor 0 of the dashboard's modules: building elements and formatting values. Imports nothing.

export const $ = (id) => document.getElementById(id);

/** Builds an element: attributes (`class`, `data-*`, …), then children (strings or nodes). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const fmtTime = (ms) => (ms ? new Date(ms).toLocaleTimeString() : '');
export const fmtDateTime = (ms) => (ms ? new Date(ms).toLocaleString() : '');
export function fmtTokens(n) {
  n = Number(n) || 0;
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(0) + 'k';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
  return String(n);
}
export function fmtCost(c) {
  c = Number(c) || 0;
  return '$' + (c === 0 ? '0' : c < 0.01 ? c.toFixed(5) : c.toFixed(2));
}
/** How long ago `ms` was, in a few characters ("just now", "42s ago", "5 min ago", "3 h ago", "2 d ago"). */
export function fmtAge(ms, now = Date.now()) {
  if (!ms) return '';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}
export function fmtIn(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  if (s <= 0) return 'due now';
  return s < 120 ? `in ${s}s` : `in ${Math.round(s / 60)} min`;
}

export function badge(status) {
  return el('span', { class: 'badge', 'data-status': status, text: String(status || '').replace(/_/g, ' ') });
}

export function progressBar(fraction) {
  const bar = el('span');
  bar.style.width = `${Math.round(fraction * 100)}%`;
  return bar;
}
