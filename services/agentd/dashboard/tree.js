// Floor 3, panel: the agent tree and the queue of agents that wait. The tree is the page's
// index of agents (`state.nodes`), which the other panels read.

import { api } from './api.js';
import { scheduleDetailRefresh, scheduleRender, select } from './schedule.js';
import { PRIORITY_RANK, humanReason, isWaiting, resumeAtOf, state, titleOf } from './state.js';
import { $, badge, el, fmtAge, fmtCost, fmtDateTime, fmtIn, fmtTime, fmtTokens, progressBar } from './util.js';

function indexTree() {
  state.nodes = new Map();
  const walk = (n) => {
    n.children = Array.isArray(n.children) ? n.children : [];
    state.nodes.set(n.agent_id, n);
    n.children.forEach(walk);
  };
  state.roots.forEach(walk);
  rollUp();
}

/** Tokens and cost per subtree (the server sends them too; recomputed after live patches). */
export function rollUp() {
  const walk = (n) => {
    let tokens = Number(n.tokens_used) || 0;
    let cost = Number(n.cost_usd) || 0;
    for (const c of n.children) {
      walk(c);
      tokens += c.tree_tokens;
      cost += c.tree_cost_usd;
    }
    n.tree_tokens = tokens;
    n.tree_cost_usd = cost;
  };
  state.roots.forEach(walk);
}

export async function loadTree() {
  const data = await api('GET', '/v1/tree');
  state.roots = Array.isArray(data?.roots) ? data.roots : [];
  indexTree();
  if (state.selected && !state.nodes.has(state.selected)) {
    // The selected agent may have been deleted; the detail refresh tells.
    scheduleDetailRefresh();
  }
  scheduleRender();
}

/** Puts a fresh inspect view into the tree node (keeping its child nodes). */
export function patchNode(view) {
  const node = state.nodes.get(view.agent_id);
  if (!node) return false;
  const children = node.children;
  Object.assign(node, view, { children });
  return true;
}

export function renderTree() {
  const box = $('tree');
  if (!state.roots.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'No agents yet.' }));
    return;
  }
  box.replaceChildren(el('ul', { role: 'group' }, state.roots.map(renderNode)));
}

function renderNode(n) {
  const open = !state.collapsed.has(n.agent_id);
  const hasKids = n.children.length > 0;
  const toggle = el('span', {
    class: 'toggle',
    text: hasKids ? (open ? '▾' : '▸') : '',
    title: hasKids ? (open ? 'collapse' : 'expand') : null,
    onclick: (ev) => {
      ev.stopPropagation();
      if (!hasKids) return;
      if (open) state.collapsed.add(n.agent_id);
      else state.collapsed.delete(n.agent_id);
      scheduleRender();
    },
  });
  const sub = el(
    'div',
    { class: 'sub' },
    badge(n.status),
    n.phase != null ? el('span', { class: 'phase', text: `phase ${n.phase}` }) : null,
    typeof n.progress === 'number' && n.progress > 0 && n.progress <= 1
      ? el('span', { class: 'progress' }, progressBar(n.progress))
      : null,
    n.current_step ? el('span', { class: 'step', text: n.current_step }) : null,
    n.status_reason ? el('span', { class: 'reason', text: humanReason(n.status_reason), title: n.status_reason }) : null,
  );
  // What tells apart agents of one type (roots above all, whose title is often the type's):
  // the first words of their prompt and their age.
  const about = el(
    'div',
    { class: 'about' },
    n.prompt_preview ? el('span', { class: 'prompt', text: n.prompt_preview, title: n.prompt_preview }) : null,
    el('span', { class: 'age', text: fmtAge(n.created_at_ms), title: `created ${fmtDateTime(n.created_at_ms)}` }),
  );
  const figures = el('span', {
    class: 'figures',
    text: `${fmtTokens(n.tree_tokens)} tok · ${fmtCost(n.tree_cost_usd)}`,
    title: `this agent: ${n.tokens_used || 0} tokens, ${fmtCost(n.cost_usd)}; with its subtree: ${n.tree_tokens} tokens, ${fmtCost(n.tree_cost_usd)}`,
  });
  const row = el(
    'div',
    {
      class: 'node' + (state.selected === n.agent_id ? ' selected' : ''),
      'data-agent-id': n.agent_id,
      'data-status': n.status,
      'data-title': n.title,
      role: 'treeitem',
      'aria-selected': state.selected === n.agent_id ? 'true' : 'false',
      tabindex: 0,
      onclick: () => select(n.agent_id),
      onkeydown: (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          select(n.agent_id);
        }
      },
    },
    toggle,
    el('span', { class: 'dot', title: n.status }),
    el('span', { class: 'title', title: n.agent_id }, n.title, el('span', { class: 'type', text: n.agent_type })),
    figures,
    about,
    sub,
  );
  const li = el('li', {}, row);
  if (hasKids && open) li.append(el('ul', { role: 'group' }, n.children.map(renderNode)));
  return li;
}

export function renderQueue() {
  const box = $('queue');
  const waiting = [...state.nodes.values()]
    .filter((n) => isWaiting(n.status))
    .sort(
      (a, b) =>
        (PRIORITY_RANK[a.priority] ?? 2) - (PRIORITY_RANK[b.priority] ?? 2) ||
        (a.created_at_ms || 0) - (b.created_at_ms || 0),
    );
  if (!waiting.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'Nothing queued or waiting.' }));
    return;
  }
  const rows = waiting.map((n) => {
    const prio = n.priority || 'normal';
    const deps = (n.depends_on || []).map((id) =>
      el('span', { class: 'dep' }, titleOf(id), ' ', badge(state.nodes.get(id)?.status || 'unknown')),
    );
    const why = [];
    if (deps.length) why.push(el('div', {}, 'depends on: ', ...deps.flatMap((d, i) => (i ? [', ', d] : [d]))));
    const resume = n.status === 'waiting_rate_limit' ? resumeAtOf(n) : null;
    // The reason, unless the lines below already say it.
    const said = (deps.length && /^depends on/.test(n.status_reason || '')) || (resume && /rate limit/.test(n.status_reason || ''));
    if (n.status_reason && !said) why.push(el('div', { class: 'muted', text: humanReason(n.status_reason) }));
    if (resume) {
      why.push(el('div', { class: 'resume', text: `rate limited; resumes at ${fmtTime(resume)} (${fmtIn(resume)})` }));
    } else if (n.status === 'waiting_rate_limit') {
      why.push(el('div', { class: 'muted', text: 'rate limited; resume time not known yet' }));
    }
    return el(
      'tr',
      { 'data-agent-id': n.agent_id, 'data-status': n.status, onclick: () => select(n.agent_id) },
      el('td', {}, el('span', { class: `prio prio-${prio}`, text: prio })),
      el('td', { text: n.title }),
      el('td', {}, badge(n.status)),
      el('td', {}, why),
    );
  });
  box.replaceChildren(
    el(
      'table',
      {},
      el('thead', {}, el('tr', {}, ['Priority', 'Agent', 'Status', 'Waiting on'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows),
    ),
  );
}
