// Drives Converse.js (the real web client, npm converse.js 14) in headless
// Chromium through agentgw's ad-hoc commands, as a person would: list the
// endpoint's commands, open each one's form, fill it in, press its
// buttons. Prints one JSON line per flow with the text the page shows for
// that command (visible text plus the values of its fields), which the Go
// test (TestAdhocConverseBrowser) asserts on, and saves a screenshot of
// each flow's end into SHOTS.
//
// Environment: PAGE_URL (the test page, which logs in over Prosody's
// WebSocket), CHROMIUM (the browser binary), ENDPOINT (the agent's JID),
// SHOTS (a directory).
import puppeteer from 'puppeteer-core';
import path from 'node:path';

const { PAGE_URL, CHROMIUM, ENDPOINT, SHOTS } = process.env;
const STEP = 60_000; // generous: a loaded 2-core machine

function emit(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
});
const consoleLines = [];
let failed = false;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 1400 });
  page.on('console', (m) => consoleLines.push(m.text()));
  page.on('pageerror', (e) => consoleLines.push('pageerror: ' + e.message));
  page.setDefaultTimeout(STEP);
  await page.goto(PAGE_URL);
  await page.waitForFunction(() => window.agentgwConnected === true);
  await page.waitForSelector('converse-adhoc-commands input[name="jid"], converse-adhoc-commands converse-autocomplete input');

  // The entity whose commands to list: the agent endpoint.
  const jidInput = await page.$('converse-adhoc-commands converse-autocomplete input');
  await jidInput.click({ clickCount: 3 });
  await jidInput.type(ENDPOINT);
  await page.click('converse-adhoc-commands input[type="submit"]');
  await page.waitForSelector('converse-adhoc-commands a[data-command-node="echo"]');
  const listed = await page.$$eval('converse-adhoc-commands a[data-command-node]', (as) => as.map((a) => a.dataset.commandNode));
  emit({ flow: 'list', commands: listed });

  // shown is what the page shows for one command: the outer alert and
  // note, and the command's list item: its text and its fields' values.
  const shown = (node) => page.evaluate((node) => {
    const root = document.querySelector('converse-adhoc-commands');
    const outer = [...root.querySelectorAll(':scope > .alert, :scope > p.form-help')].map((e) => e.innerText.trim());
    const a = root.querySelector(`a[data-command-node="${node}"]`);
    const li = a?.closest('li');
    if (!li) return { outer, text: '', values: [], actions: [] };
    const values = [...li.querySelectorAll('input:not([type=hidden]):not([type=button]), textarea, select')]
      .map((e) => `${e.name}=${e.value}`);
    const actions = [...li.querySelectorAll('input[type=button]')].map((b) => b.value);
    return { outer, text: li.innerText, values, actions };
  }, node);
  const textOf = (s) => [...s.outer, s.text, ...s.values].join('\n');
  const waitShown = async (node, pred, what) => {
    const deadline = Date.now() + STEP;
    let s;
    while (Date.now() < deadline) {
      s = await shown(node);
      if (pred(textOf(s), s)) return s;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`${node}: ${what} never shown; page shows ${JSON.stringify(s)}`);
  };
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
  const open = async (node) => {
    await page.click(`converse-adhoc-commands a[data-command-node="${node}"]`);
    return waitShown(node, (_, s) => s.actions.length > 0, 'the first stage');
  };
  const fill = async (node, name, value) => {
    const sel = `converse-adhoc-commands li:has(a[data-command-node="${node}"]) [name="${name}"]`;
    await page.waitForSelector(sel);
    await page.$eval(sel, (e) => { e.value = ''; });
    await page.type(sel, value);
  };
  const press = (node, action) =>
    page.click(`converse-adhoc-commands li:has(a[data-command-node="${node}"]) input[data-action="${action}"]`);
  const cancelBtn = (node) =>
    page.click(`converse-adhoc-commands li:has(a[data-command-node="${node}"]) input.button-cancel`);

  const flow = async (name, fn) => {
    const started = Date.now();
    try {
      const out = await fn();
      emit({ flow: name, ms: Date.now() - started, ...out });
    } catch (e) {
      failed = true;
      emit({ flow: name, error: String(e && e.message || e) });
    } finally {
      await shot(name).catch(() => {});
    }
  };

  await flow('echo', async () => {
    await open('echo');
    await fill('echo', 'message', 'hello from Converse.js');
    await press('echo', 'complete');
    const s = await waitShown('echo', (t) => t.includes('Echo: hello from Converse.js'), 'the echo');
    return { shown: textOf(s) };
  });

  await flow('get-sum', async () => {
    await open('get-sum');
    await fill('get-sum', 'a', '2');
    await fill('get-sum', 'b', '3.5');
    await press('get-sum', 'complete');
    const s = await waitShown('get-sum', (t) => t.includes('is 5.5'), 'the sum');
    return { shown: textOf(s) };
  });

  await flow('long-running', async () => {
    const node = 'trigger-long-running-operation';
    await open(node);
    await fill(node, 'duration', '8');
    await fill(node, 'steps', '4');
    await press(node, 'complete');
    // The stage shows the task's state; the person presses Next to
    // refresh it until the progress shows.
    let running = await waitShown(node, (t) => t.includes('is running') || t.includes('Progress:'), 'the running stage');
    for (const deadline = Date.now() + STEP; !textOf(running).includes('Progress:') && Date.now() < deadline;) {
      if (running.actions.includes('Next')) {
        await press(node, 'next');
      }
      await new Promise((r) => setTimeout(r, 1000));
      running = await shown(node);
    }
    if (!textOf(running).includes('Progress:')) {
      throw new Error(`no progress shown: ${JSON.stringify(running)}`);
    }
    await shot('long-running-progress');
    let s = running;
    const deadline = Date.now() + STEP;
    while (!textOf(s).includes('Long running operation completed') && Date.now() < deadline) {
      if (s.actions.includes('Next')) {
        await press(node, 'next');
      }
      await new Promise((r) => setTimeout(r, 1000));
      s = await shown(node);
    }
    s = await waitShown(node, (t) => t.includes('Long running operation completed'), 'the result');
    return { progress: textOf(running), shown: textOf(s) };
  });

  await flow('elicitation', async () => {
    const node = 'trigger-elicitation-request';
    const first = await open(node);
    if (first.actions.includes('Complete')) {
      await press(node, 'complete');
    }
    const asked = await waitShown(node, (_, s) => s.values.some((v) => v.startsWith('name=')), 'the input form');
    await shot('elicitation-form');
    await fill(node, 'name', 'Ada Lovelace');
    await press(node, 'complete');
    const s = await waitShown(node, (t) => t.includes('Ada Lovelace') && t.includes('User provided'), 'the answer\'s result');
    return { asked: textOf(asked), shown: textOf(s) };
  });

  await flow('cancel', async () => {
    const node = 'trigger-long-running-operation';
    await open(node);
    await fill(node, 'duration', '60');
    await fill(node, 'steps', '60');
    await press(node, 'complete');
    const running = await waitShown(node, (t) => t.includes('is running') || t.includes('Progress:'), 'the running stage');
    await shot('cancel-running');
    const before = consoleLines.length;
    await cancelBtn(node);
    // Converse.js closes the command on a canceled reply; what the
    // gateway answered is in its XMPP log.
    const deadline = Date.now() + STEP;
    let reply = '';
    while (!reply && Date.now() < deadline) {
      reply = consoleLines.slice(before).find((l) => l.includes('status="canceled"')) || '';
      await new Promise((r) => setTimeout(r, 200));
    }
    // Converse.js closes the command (no fields, no buttons) only on a
    // reply with status="canceled"; any other status shows
    // "Error: unexpected result".
    const s = await waitShown(node, (_, s) => s.actions.length === 0 && s.values.length === 0, 'the command closed');
    return { running: textOf(running), shown: textOf(s), reply: reply.slice(0, 2000), closed: true };
  });
} catch (e) {
  failed = true;
  emit({ flow: 'setup', error: String(e && e.message || e), console: consoleLines.slice(-40) });
} finally {
  await browser.close();
}
if (failed) {
  emit({ flow: 'console', lines: consoleLines.filter((l) => !l.includes('<')).slice(-30) });
}
process.exit(failed ? 1 : 0);
