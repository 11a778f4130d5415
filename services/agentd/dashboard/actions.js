// Floor 4: the selected agent's controls (pause … delete) and the follow-up form.

import { api, errText } from './api.js';
import { deselect, setActionStatus } from './detail.js';
import { scheduleAgentRefresh, scheduleDetailRefresh, scheduleTreeReload } from './schedule.js';
import { agentPath, state, titleOf } from './state.js';
import { $ } from './util.js';

const control = (name) => (id) => api('POST', agentPath(id, '/control'), { control: name });
const ACTIONS = {
  pause: { run: control('pause') },
  resume: { run: control('resume') },
  cancel: { confirm: 'Cancel this agent? Its running turn stops.', run: control('cancel') },
  reset: {
    confirm: "Reset this agent's session? Its conversation starts over.",
    run: (id) => api('POST', agentPath(id, '/reset'), {}),
  },
  compact: {
    confirm: "Compact this agent's session? Older entries are replaced by a summary.",
    run: (id) => api('POST', agentPath(id, '/compact'), {}),
  },
  close: { confirm: 'Close this agent? Its actor is freed; its history is kept.', run: control('close') },
  delete: {
    confirm: 'Delete this agent and all its descendants, with their history? This cannot be undone.',
    run: (id) => api('DELETE', agentPath(id)),
  },
};

export async function runAction(name) {
  const id = state.selected;
  const action = ACTIONS[name];
  if (!id || !action) return;
  const title = titleOf(id);
  if (action.confirm && !window.confirm(`${action.confirm}\n\n${title} (${id})`)) return;
  setActionStatus(`${name}…`);
  try {
    const res = await action.run(id);
    setActionStatus(`${name}: ${res?.status || res?.summary || 'done'}`);
    if (name === 'delete') {
      deselect(`${title} was deleted.`);
      scheduleTreeReload();
      return;
    }
  } catch (e) {
    setActionStatus(`${name} failed — ${errText(e)}`, true);
  }
  scheduleAgentRefresh(id);
  scheduleDetailRefresh();
}

export async function sendFollowup(ev) {
  ev.preventDefault();
  const id = state.selected;
  const textBox = $('followup-text');
  const text = textBox.value.trim();
  if (!id || !text) return;
  const interrupt = $('followup-interrupt').checked;
  const button = $('followup-send');
  button.disabled = true;
  try {
    await api('POST', agentPath(id, '/messages'), { text, interrupt });
    textBox.value = '';
    $('followup-interrupt').checked = false;
    setActionStatus(`sent to ${titleOf(id)}${interrupt ? ' (interrupting)' : ''}`);
  } catch (e) {
    setActionStatus(`send failed — ${errText(e)}`, true);
  } finally {
    button.disabled = false;
  }
  scheduleAgentRefresh(id);
  scheduleDetailRefresh();
}
