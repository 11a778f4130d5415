// Floor 2: when the page refreshes and renders. Events arrive in bursts, so refreshes are
// debounced and batched, and rendering happens at most once a frame. This module names no
// panel: `app.js` hands it the panels' loaders and renderers once at start (`install`), so
// the panels above it may schedule work without importing one another.

import { api } from './api.js';
import { agentPath, state } from './state.js';

const REFRESH_DEBOUNCE_MS = 150;

/** The panels' functions, set once by `install`. */
const panels = {
  loadTree: async () => {},
  patchNode: () => false,
  rollUp: () => {},
  loadApprovals: async () => {},
  refreshDetail: async () => {},
  showSelection: () => {},
  renderers: [],
};

/** Hands the scheduler the panels' functions (called once, by `app.js`). */
export function install(functions) {
  Object.assign(panels, functions);
}

const pending = { ids: new Set(), tree: false, detail: false, approvals: false, timer: null };

function schedule() {
  if (pending.timer) return;
  pending.timer = setTimeout(flush, REFRESH_DEBOUNCE_MS);
}
export function scheduleTreeReload() {
  pending.tree = true;
  schedule();
}
export function scheduleAgentRefresh(id) {
  pending.ids.add(id);
  schedule();
}
export function scheduleDetailRefresh() {
  pending.detail = true;
  schedule();
}
export function scheduleApprovalsRefresh() {
  pending.approvals = true;
  schedule();
}

async function flush() {
  const ids = [...pending.ids];
  const tree = pending.tree;
  const detail = pending.detail || (state.selected && pending.ids.has(state.selected));
  const approvals = pending.approvals;
  pending.ids.clear();
  pending.tree = false;
  pending.detail = false;
  pending.approvals = false;
  if (approvals) panels.loadApprovals(); // on its own: a slow list holds up no other refresh
  try {
    if (tree || ids.some((id) => !state.nodes.has(id))) {
      await panels.loadTree();
    } else {
      const views = await Promise.allSettled(ids.map((id) => api('GET', agentPath(id))));
      let reload = false;
      views.forEach((r) => {
        if (r.status === 'fulfilled') panels.patchNode(r.value);
        else reload = true; // gone (deleted) or unreachable: take the whole tree again
      });
      if (reload) await panels.loadTree();
      panels.rollUp();
      scheduleRender();
    }
    if (detail) await panels.refreshDetail();
  } catch (e) {
    console.warn('refresh failed', e);
  } finally {
    pending.timer = null;
    if (pending.tree || pending.ids.size || pending.detail || pending.approvals) schedule();
  }
}

let renderQueued = false;

/** Renders every panel in the next animation frame (once, however often it is asked). */
export function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    panels.renderers.forEach((render) => render());
  });
}

/** The URL fragment that opens agent `id` (`#/agents/<id>`): a reload keeps it, a link shares it. */
export const agentHash = (id) => `#/agents/${encodeURIComponent(id)}`;

/** The agent the URL fragment `hash` names, or null. */
export function agentOfHash(hash) {
  const m = /^#\/agents\/([^/?#]+)$/.exec(hash || '');
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}

/** Selects an agent: its details show and refresh, and the URL names it (a new history
 * entry, so Back returns to the agent before). */
export function select(id) {
  const changed = state.selected !== id;
  state.selected = id;
  if (location.hash !== agentHash(id)) location.hash = agentHash(id);
  panels.showSelection(changed);
  scheduleRender();
}

/** Takes the selected agent out of the URL (no agent is selected any more). */
export function forgetSelectionInUrl() {
  if (agentOfHash(location.hash)) history.replaceState(null, '', location.pathname + location.search);
}
