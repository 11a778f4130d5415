// Drives the agentd dashboard in a real browser (Debian's chromium through playwright-core).
//
//   node tests/browser/dashboard.mjs <base_url> <token> <out_dir> [--pause TITLE] [--followup TITLE] [--close TITLE] [--live TITLE]
//        [--approve TITLE --reject TITLE --closed TITLE] [--trace-url TEMPLATE] [--twins TITLE]
//
// Expects an agentd with auth required and a few agents already spawned. Steps: open `/`, enter
// the token, check that every agent of `GET /v1/tree` shows in the page (title, status, nesting,
// subtree tokens) and the queue; pause an agent through the API and see it change in the page
// without a reload; resume it from the page; dismiss and then accept a confirm() to close an
// agent; send a follow-up from the page and check through `GET /v1/agents/{id}/thread` that it
// reached the agent, and (with --trace-url) that its details link its latest trace; with
// --live, send the titled agent (on a slowly streaming provider) a message and see its answer grow in the page before it is stored, then land in the thread.
// With --approve/--reject/--closed (three agents each waiting in `waiting_review` on one gated
// call): the Approvals panel lists the calls with their arguments as text; a call decided
// through the API while the page's list is held stale makes the page's Reject show the 409;
// Reject without a reason sends nothing; Approve and Reject (with a reason) decide the other
// two, checked through the API, and the panel empties.
// Every row shows its agent's prompt (first words) and age; with --twins, the roots titled
// TITLE (two or more, of one type) are told apart by them. Last, the URL names the open agent:
// selecting one sets `#/agents/<id>`, a reload keeps it open, Back returns to the one before,
// and the link opened in a new tab (which asks for the token first) opens it.
// A screenshot per step goes to <out_dir>. Prints `STEP …` lines, `URL <agent_id>`, `FOLLOWUP
// <agent_id> <text>`, `APPROVED`/`REJECTED <agent_id> <call_id> [reason]` and, when every
// check passed, `DASHBOARD OK`; exits 1 otherwise.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [baseArg, tokenArg, outDir, ...rest] = process.argv.slice(2);
if (!baseArg || !tokenArg || !outDir) {
  console.error('usage: node dashboard.mjs <base_url> <token> <out_dir> [--pause TITLE] [--followup TITLE] [--close TITLE]');
  process.exit(2);
}
const base = baseArg.replace(/\/$/, '');
const TOKEN = tokenArg;
const opts = { pause: 'Docs Researcher', followup: 'Dashboard Lead', close: 'Grandchild Checker' };
for (let i = 0; i < rest.length; i += 2) opts[rest[i].replace(/^--/, '')] = rest[i + 1];
const executablePath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const WAIT = 10_000;

let playwright;
try {
  playwright = await import('playwright-core');
} catch (e) {
  console.error(`playwright-core is not installed (run \`npm ci --prefix tests/browser\`): ${e.message}`);
  process.exit(3);
}

mkdirSync(outDir, { recursive: true });
const started = Date.now();
const step = (msg) => console.log(`STEP ${((Date.now() - started) / 1000).toFixed(1)}s ${msg}`);
function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

/** The API as the test sees it (with the token). */
async function api(method, path, body) {
  const resp = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function until(what, fn, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

function flatten(roots) {
  const out = [];
  const walk = (n) => {
    out.push(n);
    (n.children || []).forEach(walk);
  };
  roots.forEach(walk);
  return out;
}

let browser;
let page;
let shot = 0;
async function screenshot(name) {
  shot += 1;
  const file = join(outDir, `${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  step(`screenshot ${file}`);
}

const consoleErrors = [];
const foreignRequests = [];
const deadline = setTimeout(() => {
  console.error('FAILED: the browser test took longer than 60 s');
  process.exit(1);
}, 60_000);

try {
  // The shell is open, the API is not.
  const shell = await fetch(base + '/');
  check(shell.status === 200, `GET / without a token answered ${shell.status}`);
  check((shell.headers.get('content-type') || '').startsWith('text/html'), 'GET / is HTML');
  const noToken = await fetch(base + '/v1/tree');
  check(noToken.status === 401, `GET /v1/tree without a token answered ${noToken.status}`);

  browser = await playwright.chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // Expected: 401s until the token is entered; 404 from /checkpoints where it is not served.
    const where = m.location()?.url || '';
    if (/status of 401/.test(m.text())) return;
    if (/status of 404/.test(m.text()) && where.includes('/checkpoints')) return;
    // Expected: the 409 of a decision on a call that was decided meanwhile (step 8).
    if (/status of 409/.test(m.text()) && where.includes('/approvals/')) return;
    consoleErrors.push(`${m.text()} (${where})`);
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith('data:')) foreignRequests.push(u);
  });

  // 1. Open the page: it asks for the token.
  step(`open ${base}/`);
  const resp = await page.goto(base + '/');
  check(resp && resp.status() === 200, 'the page loads without a token');
  await page.locator('#auth').waitFor({ state: 'visible', timeout: WAIT });
  await screenshot('token-form');

  // 2. Enter the token: the tree appears, live.
  await page.fill('#auth-token', TOKEN);
  await page.click('#auth-submit');
  await page.locator('#auth').waitFor({ state: 'hidden', timeout: WAIT });
  await page.locator('#stream[data-state="live"]').waitFor({ timeout: WAIT });
  const stored = await page.evaluate(() => sessionStorage.getItem('agentd.token'));
  check(stored === TOKEN, 'the token is kept in sessionStorage');
  step('token accepted; event stream live');

  const tree = await api('GET', '/v1/tree');
  const agents = flatten(tree.roots);
  check(agents.length >= 3, `the test spawned agents (found ${agents.length})`);
  for (const a of agents) {
    const row = page.locator(`.node[data-agent-id="${a.agent_id}"]`);
    await row.waitFor({ timeout: WAIT });
    const title = await row.getAttribute('data-title');
    check(title === a.title, `row of ${a.agent_id} shows title ${a.title} (got ${title})`);
    if (a.parent_id) {
      const nested = await page
        .locator(`li:has(> .node[data-agent-id="${a.parent_id}"]) .node[data-agent-id="${a.agent_id}"]`)
        .count();
      check(nested === 1, `${a.title} is nested under its parent`);
    }
  }
  // Statuses settle (turns of the spawned agents may still be running).
  await until('every status to match the API', async () => {
    const now = flatten((await api('GET', '/v1/tree')).roots);
    for (const a of now) {
      const s = await page.locator(`.node[data-agent-id="${a.agent_id}"]`).getAttribute('data-status');
      if (s !== a.status) return false;
    }
    return true;
  });
  const settled = flatten((await api('GET', '/v1/tree')).roots);
  for (const a of settled) {
    const figures = await page.locator(`.node[data-agent-id="${a.agent_id}"] .figures`).getAttribute('title');
    check(
      figures.includes(`subtree: ${a.tree_tokens} tokens`),
      `${a.title}: subtree tokens ${a.tree_tokens} in "${figures}"`,
    );
    console.log(`TREE ${a.title} [${a.status}] depth=${a.depth} tree_tokens=${a.tree_tokens}`);
  }
  // Each row shows the first words of its agent's prompt and its age.
  for (const a of settled) {
    const about = page.locator(`.node[data-agent-id="${a.agent_id}"] .about`);
    const prompt = about.locator('.prompt');
    if (a.prompt_preview) {
      check((await prompt.innerText()) === a.prompt_preview, `${a.title} shows its prompt "${a.prompt_preview}"`);
    } else {
      check((await prompt.count()) === 0, `${a.title} was spawned without a prompt and shows none`);
    }
    const age = await about.locator('.age').innerText();
    check(/just now|s ago|min ago/.test(age), `${a.title} shows its age: "${age}"`);
  }
  // Roots of one type and title are told apart in the tree.
  if (opts.twins) {
    const twins = settled.filter((a) => !a.parent_id && a.title === opts.twins);
    check(twins.length >= 2 && new Set(twins.map((a) => a.agent_type)).size === 1, `roots titled ${opts.twins} of one type: ${twins.length}`);
    const shown = [];
    for (const a of twins) {
      shown.push(await page.locator(`.node[data-agent-id="${a.agent_id}"] .about`).innerText());
    }
    check(new Set(shown).size === twins.length, `the twins' rows differ: ${JSON.stringify(shown)}`);
    console.log(`TWINS ${shown.map((t) => t.replace(/\s+/g, ' ')).join(' | ')}`);
  }
  const root = settled.find((a) => !a.parent_id && a.title === opts.followup);
  check(root.tree_tokens > root.tokens_used, 'the root rolls up its children’s tokens');
  // The queue lists the waiting agents with what they wait on.
  for (const a of settled.filter((x) => x.status === 'queued' || x.status.startsWith('waiting_'))) {
    const row = page.locator(`#queue tr[data-agent-id="${a.agent_id}"]`);
    await row.waitFor({ timeout: WAIT });
    const text = await row.innerText();
    for (const dep of a.depends_on || []) {
      const depTitle = settled.find((x) => x.agent_id === dep)?.title;
      check(text.includes(depTitle), `queue row of ${a.title} names its dependency ${depTitle}: ${text}`);
    }
    check(text.toLowerCase().includes((a.priority || 'normal').toLowerCase()), `queue row shows priority: ${text}`);
    if (a.status === 'waiting_rate_limit') check(/resumes at/.test(text), `queue row shows the resume time: ${text}`);
    console.log(`QUEUE ${a.title} [${a.status}] ${text.replace(/\s+/g, ' ')}`);
  }
  // Queue rows come by priority: critical > high > normal > low.
  const RANK = { critical: 0, high: 1, normal: 2, low: 3 };
  const order = await page.locator('#queue tbody tr').evaluateAll((rows) => rows.map((r) => r.querySelector('.prio').textContent));
  check(order.every((p, i) => i === 0 || RANK[order[i - 1]] <= RANK[p]), `queue in priority order: ${order}`);
  await screenshot('tree');

  const byTitle = (t) => {
    const a = settled.find((x) => x.title === t);
    check(a, `an agent titled ${t}`);
    return a;
  };

  // 3. A status change made through the API shows up live, without a reload.
  const target = byTitle(opts.pause);
  await page.evaluate(() => {
    window.__noReload = 'still here';
  });
  await page.click(`.node[data-agent-id="${target.agent_id}"]`);
  await page.locator(`#detail-head h3[data-agent-id="${target.agent_id}"]`).waitFor({ timeout: WAIT });
  await page.locator('#checkpoints .cp, #checkpoints .none').first().waitFor({ timeout: WAIT });
  step(`pause ${target.title} through the API`);
  await api('POST', `/v1/agents/${target.agent_id}/control`, { control: 'pause' });
  await page.locator(`.node[data-agent-id="${target.agent_id}"][data-status="paused"]`).waitFor({ timeout: WAIT });
  await page.locator(`#detail-head h3[data-status="paused"]`).waitFor({ timeout: WAIT });
  await page.locator('#events li[data-type="status_changed"]').first().waitFor({ timeout: WAIT });
  // Checkpoints, where this agentd serves them: one taken on the pause shows up too.
  const cpResp = await fetch(`${base}/v1/agents/${target.agent_id}/checkpoints`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  if (cpResp.ok) {
    const body = await cpResp.json();
    const list = Array.isArray(body) ? body : body.checkpoints || [];
    const first = list[0]?.checkpoint_id ?? list[0]?.id;
    if (first) {
      await page.locator(`#checkpoints .cp[data-checkpoint-id="${first}"]`).waitFor({ timeout: WAIT });
      step(`checkpoint ${first} shown`);
    }
  } else {
    await page.locator('#checkpoints .none', { hasText: 'no checkpoints' }).waitFor({ timeout: WAIT });
    step(`no checkpoints route (${cpResp.status}); the page says so`);
  }
  check((await page.evaluate(() => window.__noReload)) === 'still here', 'the page was not reloaded');
  step(`${target.title} shows paused live`);
  await screenshot('paused-live');

  // 4. Resume it from the page (no confirm for resume).
  await page.click('button[data-action="resume"]');
  await until('the API to show it resumed', async () => (await api('GET', `/v1/agents/${target.agent_id}`)).status !== 'paused');
  await page
    .locator(`.node[data-agent-id="${target.agent_id}"]:not([data-status="paused"])`)
    .waitFor({ timeout: WAIT });
  step(`${target.title} resumed from the page`);

  // 5. Destructive actions ask first: dismissing changes nothing, accepting closes.
  const closing = byTitle(opts.close);
  await page.click(`.node[data-agent-id="${closing.agent_id}"]`);
  await page.locator(`#detail-head h3[data-agent-id="${closing.agent_id}"]`).waitFor({ timeout: WAIT });
  const dialogs = [];
  const onDialog = (accept) => async (d) => {
    dialogs.push(d.message());
    if (accept) await d.accept();
    else await d.dismiss();
  };
  const dismiss = onDialog(false);
  page.once('dialog', dismiss);
  await page.click('button[data-action="delete"]');
  await until('the delete confirm', () => dialogs.length === 1);
  check(/Delete/.test(dialogs[0]), `delete asks first: ${dialogs[0]}`);
  await new Promise((r) => setTimeout(r, 300));
  check((await api('GET', `/v1/agents/${closing.agent_id}`)).agent_id === closing.agent_id, 'a dismissed delete deletes nothing');
  page.once('dialog', onDialog(true));
  await page.click('button[data-action="close"]');
  await until('the close confirm', () => dialogs.length === 2);
  await until('the API to show it closed', async () => (await api('GET', `/v1/agents/${closing.agent_id}`)).status === 'closed');
  await page.locator(`.node[data-agent-id="${closing.agent_id}"][data-status="closed"]`).waitFor({ timeout: WAIT });
  step(`${closing.title} closed after the confirm`);
  await screenshot('closed');

  // 6. A follow-up from the page reaches the agent's thread.
  const lead = byTitle(opts.followup);
  const text = `dashboard follow-up ${Math.random().toString(36).slice(2, 10)}`;
  await page.click(`.node[data-agent-id="${lead.agent_id}"]`);
  await page.locator(`#detail-head h3[data-agent-id="${lead.agent_id}"]`).waitFor({ timeout: WAIT });
  await page.fill('#followup-text', text);
  await screenshot('followup-typed');
  await page.click('#followup-send');
  await page.locator('#action-status', { hasText: 'sent to' }).waitFor({ timeout: WAIT });
  await until('the follow-up in the thread (API)', async () => {
    const t = await api('GET', `/v1/agents/${lead.agent_id}/thread`);
    return t.entries.some((e) => e.role === 'user' && e.text === text);
  });
  // The page's thread view follows the conversation live (the answer arrives after the send).
  await page.locator('#thread .entry[data-role="user"]', { hasText: text }).waitFor({ timeout: WAIT });
  await page.locator('#thread .entry[data-role="assistant"]', { hasText: text }).waitFor({ timeout: WAIT });
  await page.locator('#thread .entry[data-role="assistant"]', { hasText: text }).scrollIntoViewIfNeeded();
  check((await page.evaluate(() => window.__noReload)) === 'still here', 'still no reload');
  console.log(`FOLLOWUP ${lead.agent_id} ${text}`);
  await screenshot('followup-answered');
  // With --trace-url (the `[telemetry] trace_url` agentd runs with): the details link the
  // trace of the agent's latest turn, the template filled with its id.
  if (opts['trace-url']) {
    const traceId = (await api('GET', `/v1/agents/${lead.agent_id}`)).trace_id;
    check(/^[0-9a-f]{32}$/.test(traceId || ''), `the lead's trace id: ${traceId}`);
    const href = opts['trace-url'].replaceAll('{trace_id}', traceId);
    await page.locator(`#detail-head dd a[href="${href}"]`, { hasText: traceId }).waitFor({ timeout: WAIT });
    console.log(`TRACE LINK ${href}`);
  }

  // 7. An answer being streamed shows in the page as it arrives, then as a thread entry.
  if (opts.live) {
    const writer = byTitle(opts.live);
    await page.click(`.node[data-agent-id="${writer.agent_id}"]`);
    await page.locator(`#detail-head h3[data-agent-id="${writer.agent_id}"]`).waitFor({ timeout: WAIT });
    await api('POST', `/v1/agents/${writer.agent_id}/messages`, { text: 'stream a story' });
    await page.locator('#live-text:not([hidden])').waitFor({ timeout: WAIT });
    const liveText = () => page.locator('#live-text-body').innerText();
    const first = await liveText();
    await until('the live text to grow', async () => (await liveText()).length > first.length);
    const stored = await api('GET', `/v1/agents/${writer.agent_id}/thread`);
    check(
      !stored.entries.some((e) => e.role === 'assistant'),
      'the text shows while it arrives, before the answer is stored',
    );
    const grown = await liveText();
    check(grown.startsWith(first), `the text grows at its end: "${first}" then "${grown}"`);
    await screenshot('live-text');
    console.log(`LIVE ${writer.agent_id} ${first.length} -> ${grown.length} chars`);
    await page
      .locator('#thread .entry[data-role="assistant"]', { hasText: 'The end.' })
      .waitFor({ timeout: 20_000 });
    await page.locator('#live-text').waitFor({ state: 'hidden', timeout: WAIT });
    step(`${writer.title}'s streamed answer is in the thread`);
    await screenshot('live-text-stored');
  }

  // 8. Approval gates: the panel lists the gated calls; Approve and Reject decide them.
  if (opts.approve) {
    const gated = (await api('GET', '/v1/tool_calls?status=awaiting_approval')).tool_calls;
    const callOf = (title) => {
      const a = byTitle(title);
      const c = gated.find((x) => x.agent_id === a.agent_id);
      check(c, `${title} has a call awaiting approval: ${JSON.stringify(gated)}`);
      return { agent: a, call: c, row: page.locator(`#approvals li[data-call-id="${c.call_id}"]`) };
    };
    const approved = callOf(opts.approve);
    const rejected = callOf(opts.reject);
    const closed = callOf(opts.closed);
    for (const g of [approved, rejected, closed]) {
      await g.row.waitFor({ timeout: WAIT });
      const text = await g.row.innerText();
      check(text.includes(g.call.tool) && text.includes(g.agent.title), `the row names tool and agent: ${text}`);
      check(/requested /.test(text) && /deadline/.test(text), `the row shows its times: ${text}`);
      const args = await g.row.locator('pre.args').innerText();
      check(
        JSON.stringify(JSON.parse(args)) === JSON.stringify(g.call.arguments),
        `the row shows the arguments: ${args}`,
      );
      await g.row.locator('.badge[data-status="waiting_review"]').waitFor({ timeout: WAIT });
      console.log(`APPROVAL ${g.agent.title} ${g.call.tool} ${args.replace(/\s+/g, ' ')}`);
    }
    // Arguments are shown as text, never as markup.
    check((await page.locator('#approvals img, #approvals pre.args *').count()) === 0, 'arguments are escaped');
    check(
      (await page.evaluate(() => window.__xss)) === undefined,
      'markup in the arguments did not run',
    );
    await page.locator('#approvals-panel').scrollIntoViewIfNeeded();
    await screenshot('approvals');

    // A call decided elsewhere while the page's list is stale: the page shows the 409.
    let release;
    const gate = new Promise((r) => (release = r));
    const isList = (url) => url.pathname === '/v1/tool_calls';
    // Held until released; then (the route stays) a pass-through.
    await page.route(isList, async (route) => {
      await gate;
      await route.continue();
    });
    await api('POST', `/v1/agents/${closed.agent.agent_id}/approvals/${closed.call.call_id}`, {
      approve: false,
      reason: 'decided through the API',
    });
    await page.locator(`.node[data-agent-id="${closed.agent.agent_id}"]:not([data-status="waiting_review"])`).waitFor({ timeout: WAIT });
    check(await closed.row.isVisible(), 'the stale row is still shown while the list is held');
    await closed.row.locator('.approval-reason').fill('too late');
    await closed.row.locator('button[data-decision="reject"]').click();
    await page.locator('#approval-status[data-outcome="error"]', { hasText: 'closed already' }).waitFor({ timeout: WAIT });
    const said = await page.locator('#approval-status').innerText();
    check(/tool_call_closed/.test(said), `the page shows the 409's code: ${said}`);
    await screenshot('approval-409');
    release();
    await closed.row.waitFor({ state: 'detached', timeout: WAIT });
    step(`a decision on ${closed.agent.title}'s closed call showed: ${said}`);

    // Reject asks for a reason first and sends nothing without one.
    await rejected.row.locator('button[data-decision="reject"]').click();
    await page.locator('#approval-status[data-outcome="error"]', { hasText: 'give a reason' }).waitFor({ timeout: WAIT });
    await new Promise((r) => setTimeout(r, 300));
    check(
      (await api('GET', '/v1/tool_calls?status=awaiting_approval')).tool_calls.some((c) => c.call_id === rejected.call.call_id),
      'a reject without a reason decides nothing',
    );

    // The agent's link in its row selects it; its details name the call that waits.
    await approved.row.locator('a.agent').click();
    await page.locator(`#detail-head h3[data-agent-id="${approved.agent.agent_id}"][data-status="waiting_review"]`).waitFor({ timeout: WAIT });
    await page.locator('#detail-head dd a', { hasText: approved.call.tool }).waitFor({ timeout: WAIT });
    await page.locator(`#approvals li.selected[data-call-id="${approved.call.call_id}"]`).waitFor({ timeout: WAIT });

    // Approve by clicking.
    await approved.row.locator('button[data-decision="approve"]').click();
    await page.locator('#approval-status[data-outcome="ok"]', { hasText: 'approved' }).waitFor({ timeout: WAIT });
    await approved.row.waitFor({ state: 'detached', timeout: WAIT });
    await until('the approved call to be published', async () =>
      (await api('GET', '/v1/tool_calls?status=pending')).tool_calls.some((c) => c.call_id === approved.call.call_id),
    );
    await page.locator(`.node[data-agent-id="${approved.agent.agent_id}"][data-status="waiting_tool"]`).waitFor({ timeout: WAIT });
    console.log(`APPROVED ${approved.agent.agent_id} ${approved.call.call_id}`);

    // Reject by clicking, with a reason.
    const reason = `not on a ${['Sunday', 'Monday', 'Tuesday'][Math.floor(Math.random() * 3)]} ${Math.random().toString(36).slice(2, 8)}`;
    await rejected.row.locator('.approval-reason').fill(reason);
    await rejected.row.locator('button[data-decision="reject"]').click();
    await page.locator('#approval-status[data-outcome="ok"]', { hasText: 'rejected' }).waitFor({ timeout: WAIT });
    await rejected.row.waitFor({ state: 'detached', timeout: WAIT });
    await until('the rejected agent to leave waiting_review', async () =>
      (await api('GET', `/v1/agents/${rejected.agent.agent_id}`)).status !== 'waiting_review',
    );
    console.log(`REJECTED ${rejected.agent.agent_id} ${rejected.call.call_id} ${reason}`);

    // The panel empties.
    await page.locator('#approvals-panel[data-count="0"] #approvals .none').waitFor({ timeout: WAIT });
    check(
      (await api('GET', '/v1/tool_calls?status=awaiting_approval')).tool_calls.length === 0,
      'no call awaits approval',
    );
    step('approvals decided from the page; the panel is empty');
    await screenshot('approvals-decided');
  }

  // 9. The URL names the open agent: a reload keeps it, Back returns, a link shares it.
  {
    const first = byTitle(opts.followup);
    const second = byTitle(opts.pause);
    const opened = async (p, a) => {
      await p.locator(`#detail-head h3[data-agent-id="${a.agent_id}"]`).waitFor({ timeout: WAIT });
      await p.locator(`.node.selected[data-agent-id="${a.agent_id}"]`).waitFor({ timeout: WAIT });
    };
    await page.click(`.node[data-agent-id="${first.agent_id}"]`);
    await opened(page, first);
    await until('the URL to name the selected agent', async () => (await page.evaluate(() => location.hash)) === `#/agents/${first.agent_id}`);
    await page.reload();
    await opened(page, first);
    check((await page.evaluate(() => location.hash)) === `#/agents/${first.agent_id}`, 'the reload kept the URL');
    step(`${first.title} open again after a reload`);
    await page.click(`.node[data-agent-id="${second.agent_id}"]`);
    await opened(page, second);
    check((await page.evaluate(() => location.hash)) === `#/agents/${second.agent_id}`, 'the URL follows the selection');
    await page.goBack();
    await opened(page, first);
    step(`Back returned to ${first.title}`);
    // A shared link, opened in a new tab: the token first (sessionStorage is per tab), then
    // the agent it names.
    const shared = await context.newPage();
    shared.on('pageerror', (e) => consoleErrors.push(String(e)));
    await shared.goto(`${base}/#/agents/${second.agent_id}`);
    await shared.locator('#auth').waitFor({ state: 'visible', timeout: WAIT });
    await shared.fill('#auth-token', TOKEN);
    await shared.click('#auth-submit');
    await opened(shared, second);
    await shared.screenshot({ path: join(outDir, 'shared-link.png'), fullPage: true });
    await shared.close();
    console.log(`URL ${second.agent_id}`);
    await screenshot('url');
  }

  check(foreignRequests.length === 0, `requests left the origin: ${foreignRequests.join(', ')}`);
  check(consoleErrors.length === 0, `console errors: ${consoleErrors.join(' | ')}`);
  console.log('DASHBOARD OK');
} catch (e) {
  console.error(`FAILED: ${e.stack || e}`);
  if (page) await screenshot('failure').catch(() => {});
  process.exitCode = 1;
} finally {
  clearTimeout(deadline);
  if (browser) await browser.close().catch(() => {});
}
