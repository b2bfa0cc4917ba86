// Drives the agentgw operator console in headless Chromium as an operator
// would: log in with the XMPP account, open the agent, run tools with the
// form (watching progress arrive, answering an input request, cancelling),
// grant and revoke a domain. Prints one JSON line per flow with the text
// the page shows, which the Go test (TestConsoleBrowser) asserts on, and
// saves a screenshot of each page at 1280 and 360 px into SHOTS.
//
// Environment: BASE_URL, CHROMIUM, ADMIN, PASSWORD, ENDPOINT, SHOTS.
import puppeteer from 'puppeteer-core';
import path from 'node:path';

const { BASE_URL, CHROMIUM, ADMIN, PASSWORD, ENDPOINT, SHOTS } = process.env;
const STEP = 60_000; // generous: a loaded 2-core machine

function emit(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
});
const problems = [];
let failed = false;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(STEP);
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('dialog', (d) => d.accept());
  const text = () => page.evaluate(() => document.body.innerText);
  // shoot saves the current page at 1280 and at 360 px wide, and checks
  // that at 360 px nothing but the tables' own scroll boxes is wider.
  const shoot = async (name) => {
    for (const width of [1280, 360]) {
      await page.setViewport({ width, height: 900 });
      await page.screenshot({ path: path.join(SHOTS, `${name}-${width}.png`), fullPage: true });
      if (width === 360) {
        const wide = await page.evaluate(() => document.documentElement.scrollWidth);
        if (wide > 380) problems.push(`${name}: ${wide} px wide at 360 px`);
      }
    }
    await page.setViewport({ width: 1280, height: 900 });
  };
  const flow = async (name, f) => {
    try { const r = await f(); emit({ flow: name, ...r }); }
    catch (e) { failed = true; emit({ flow: name, error: String(e), shown: await text().catch(() => '') }); throw e; }
  };
  const submitAndWait = (sel) => Promise.all([page.waitForNavigation(), page.click(sel)]);
  // runTool fills the try-this-tool form of tool (the fields the console
  // made from its input schema) and lands on the task page.
  const runTool = async (tool, fields) => {
    await page.goto(`${BASE_URL}/agents/${ENDPOINT}`);
    const form = `form.run:has(input[name="tool"][value="${tool}"])`;
    await page.waitForSelector(`${form} input[name="form"][value="fields"]`);
    for (const [name, value] of Object.entries(fields)) {
      const sel = `${form} [name="arg.${name}"]`;
      await page.$eval(sel, (e) => { e.value = ''; });
      await page.type(sel, value);
    }
    await submitAndWait(`${form} button`);
    await page.waitForSelector('#task');
  };
  const stateIs = (s) => page.waitForFunction((s) => document.getElementById('state')?.textContent === s, {}, s);

  await flow('login', async () => {
    await page.goto(`${BASE_URL}/login`);
    await shoot('login');
    await page.type('#login-xmpp input[name="jid"]', ADMIN);
    await page.type('#login-xmpp input[name="password"]', PASSWORD);
    await submitAndWait('#login-xmpp button');
    await shoot('agents');
    return { shown: await text() };
  });
  await flow('agent', async () => {
    await Promise.all([page.waitForNavigation(), page.click(`a[href="/agents/${ENDPOINT}"]`)]);
    await shoot('agent');
    return { shown: await text() };
  });
  await flow('progress', async () => {
    await runTool('slow', { steps: '3' });
    // The page follows the task live (Server-Sent Events): the events
    // table grows while the task runs, without a reload.
    const seen = new Set();
    const start = Date.now();
    while (Date.now() - start < STEP) {
      const s = await page.evaluate(() => document.getElementById('state').textContent + ' ' + document.querySelector('#events tbody').innerText);
      seen.add(s);
      if (s.startsWith('completed')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await stateIs('completed');
    await shoot('task-completed');
    const live = await page.$eval('#task', (e) => e.getAttribute('data-live'));
    // Snapshots of the running task with progress: each a revision that
    // arrived while the page was open.
    const runningWithProgress = [...seen].filter((x) => x.startsWith('running') && x.includes('progress')).length;
    return { seen: [...seen].join('\n'), shown: await text(), live, runningWithProgress };
  });
  await flow('input', async () => {
    await runTool('ask', {});
    await page.waitForSelector('#input:not([hidden])');
    const asked = await page.$eval('#input-request', (e) => e.textContent);
    await shoot('task-input');
    await page.$eval('#input-form textarea', (t) => { t.value = '{"unit":"C"}'; });
    await submitAndWait('#input-form button');
    await stateIs('completed');
    return { asked, shown: await text() };
  });
  await flow('cancel', async () => {
    await runTool('wait', {});
    await stateIs('running');
    await submitAndWait('#cancel button');
    await stateIs('cancelled');
    await shoot('task-cancelled');
    return { shown: await text() };
  });
  await flow('tasks', async () => {
    await page.goto(`${BASE_URL}/tasks`);
    await shoot('tasks');
    return { shown: await text() };
  });
  await flow('grant', async () => {
    await page.goto(`${BASE_URL}/grants`);
    await page.type('#grant input[name="principal"]', 'partner.example');
    await submitAndWait('#grant button');
    await shoot('grants');
    return { shown: await text() };
  });
  await flow('revoke', async () => {
    await submitAndWait('#grants form button');
    return { shown: await text() };
  });
  await flow('selfreg', async () => {
    await page.goto(`${BASE_URL}/selfreg`);
    await shoot('selfreg');
    return { shown: await text() };
  });
  await flow('bridges', async () => {
    await page.goto(`${BASE_URL}/bridges`);
    await shoot('bridges');
    return { shown: await text() };
  });
  if (problems.length) { failed = true; emit({ flow: 'page', error: problems.join('\n') }); }
} catch (e) {
  failed = true;
  emit({ flow: 'run', error: String(e), problems });
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
