// agentd dashboard: the live agent tree, one agent's thread, checkpoints and events, its
// controls, the queue, and the tool calls that wait for a person's approval. The URL names the
// open agent (`#/agents/<id>`), so a reload keeps it and a link shares it. Vanilla JS ES
// modules, no build step, everything from this origin. This entry module wires the panels
// together and starts the page.
//
// The modules import one way, floor by floor (a module imports only from floors below it):
//   0 util.js       elements and formatting
//   1 state.js      what the page knows;  api.js  calls to /v1 with the bearer token
//   2 schedule.js   debounced refreshes, the render frame, selection (names no panel)
//   3 tree.js       the tree and the queue;  approvals.js  the approvals panel;
//     detail.js     the selected agent (imports tree.js and approvals.js)
//   4 actions.js    the controls and follow-ups;  stream.js  the event stream
//   5 app.js        this file

import { runAction, sendFollowup } from './actions.js';
import { api, errText, forgetToken, token } from './api.js';
import { loadApprovals, renderApprovals } from './approvals.js';
import { deselect, refreshDetail, renderDetailHead, showSelection } from './detail.js';
import { agentOfHash, install, scheduleApprovalsRefresh, scheduleRender, scheduleTreeReload, select } from './schedule.js';
import { state } from './state.js';
import { streamEvents } from './stream.js';
import { loadTree, patchNode, renderQueue, renderTree, rollUp } from './tree.js';
import { $, el } from './util.js';

install({
  loadTree,
  patchNode,
  rollUp,
  loadApprovals,
  refreshDetail,
  showSelection,
  renderers: [renderTree, renderQueue, renderApprovals, renderDetailHead],
});

async function loadInfo() {
  try {
    const info = await api('GET', '/v1/info');
    $('info').textContent = `v${info.version} · model ${info.model_backend} · store ${info.store}`;
    state.traceUrl = info.trace_url || null;
  } catch (e) {
    $('info').textContent = errText(e);
  }
}

/** Opens the agent the URL names (`#/agents/<id>`), or closes the details when it names none. */
function followUrl() {
  const id = agentOfHash(location.hash);
  if (id && id !== state.selected) select(id);
  else if (!id && state.selected) deselect();
}

function refreshAll() {
  scheduleTreeReload();
  scheduleApprovalsRefresh();
}

async function main() {
  document.querySelectorAll('[data-action]').forEach((b) => b.addEventListener('click', () => runAction(b.dataset.action)));
  $('followup').addEventListener('submit', sendFollowup);
  $('followup-text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) sendFollowup(ev);
  });
  $('refresh').addEventListener('click', refreshAll);
  $('forget-token').hidden = !token();
  $('forget-token').addEventListener('click', () => {
    forgetToken();
    window.location.reload();
  });
  // Rate-limit and approval-deadline countdowns.
  setInterval(() => {
    if ([...state.nodes.values()].some((n) => n.status === 'waiting_rate_limit')) scheduleRender();
    if (state.approvals.some((c) => c.deadline_ms)) renderApprovals();
  }, 1000);
  // The agents' ages in the tree.
  setInterval(scheduleRender, 30_000);
  // Back, Forward, an edited or followed link: the URL says which agent is open.
  window.addEventListener('hashchange', followUrl);

  await Promise.all([
    loadInfo(),
    loadTree().catch((e) => $('tree').replaceChildren(el('p', { class: 'error', text: errText(e) }))),
    loadApprovals(),
  ]);
  followUrl();
  document.body.dataset.ready = 'true';
  streamEvents();
}

// A small hook for debugging from the console.
window.agentdDashboard = { state, refresh: refreshAll };

main();
