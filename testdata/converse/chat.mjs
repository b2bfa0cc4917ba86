// Drives Converse.js (npm converse.js 14) in headless Chromium as a person
// chatting with an agent: add the agent by its XMPP address from the
// contacts panel ("Add a contact"), open its chat from the contacts list,
// write a message, and read the agent's reply in the chat view. Prints one
// JSON line per step, which the Go test (TestConverseChatBrowser) asserts
// on, and saves screenshots (1280 and 360 px wide) into SHOTS.
//
// Environment: PAGE_URL, CHROMIUM, ENDPOINT (the agent's JID), SHOTS.
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
  await page.setViewport({ width: 1280, height: 900 });
  page.on('console', (m) => consoleLines.push(m.text()));
  page.on('pageerror', (e) => consoleLines.push('pageerror: ' + e.message));
  page.setDefaultTimeout(STEP);
  const shot = async (name) => {
    await page.screenshot({ path: path.join(SHOTS, name + '-1280.png') });
    await page.setViewport({ width: 360, height: 740 });
    await page.screenshot({ path: path.join(SHOTS, name + '-360.png') });
    await page.setViewport({ width: 1280, height: 900 });
  };
  const step = async (name, fn) => {
    try {
      emit({ step: name, ...(await fn()) });
    } catch (e) {
      failed = true;
      emit({ step: name, error: String(e && e.message || e) });
      throw e;
    } finally {
      await shot(name).catch(() => {});
    }
  };

  await page.goto(PAGE_URL);
  await page.waitForFunction(() => window.agentgwConnected === true);

  // Find the agent: add it by its address, as a person told "write to
  // hermes@…" would, from the contacts panel's menu.
  await step('find', async () => {
    await page.waitForSelector('converse-roster a.add-contact');
    await page.$eval('converse-roster a.add-contact', (a) => a.click());
    const input = 'converse-add-contact-modal form.add-xmpp-contact input[name="jid"]';
    await page.waitForSelector(input, { visible: true });
    await page.type(input, ENDPOINT);
    await page.type('converse-add-contact-modal form.add-xmpp-contact input[name="name"]', 'Hermes');
    await page.click('converse-add-contact-modal form.add-xmpp-contact button[type="submit"]');
    const link = `converse-roster a.open-chat[data-jid="${ENDPOINT}"]`;
    await page.waitForSelector(link);
    // The gateway grants the presence subscription (Converse.js's roster
    // model says so); the contact then shows the agent's availability.
    const subscription = await page.waitForFunction((jid) => {
      const s = window.agentgwSubscription(jid);
      return s === 'to' || s === 'both' ? s : false;
    }, {}, ENDPOINT).then((h) => h.jsonValue());
    const status = await page.waitForFunction((link) => {
      const icon = document.querySelector(link)?.querySelector('converse-icon.chat-status');
      return icon?.getAttribute('title') || false;
    }, {}, link).then((h) => h.jsonValue());
    const roster = await page.$eval('converse-roster', (r) => r.innerText);
    return { subscription, status, roster };
  });

  // Open the chat from the contacts list and write to the agent.
  await step('chat', async () => {
    await page.click(`converse-roster a.open-chat[data-jid="${ENDPOINT}"]`);
    const ta = `converse-chat[jid="${ENDPOINT}"] textarea.chat-textarea`;
    await page.waitForSelector(ta, { visible: true });
    await page.type(ta, 'echo hello from Converse.js');
    await page.keyboard.press('Enter');
    const reply = await page.waitForFunction((jid) => {
      const msgs = [...document.querySelectorAll(`converse-chat[jid="${jid}"] .chat-msg`)];
      const m = msgs.find((m) => (m.dataset.from || '').startsWith(jid));
      const text = m?.querySelector('.chat-msg__text')?.innerText;
      return text ? { text, from: m.dataset.from } : false;
    }, {}, ENDPOINT).then((h) => h.jsonValue());
    const view = await page.$eval(`converse-chat[jid="${ENDPOINT}"]`, (c) => c.innerText);
    return { reply: reply.text.trim(), from: reply.from, view };
  });
} catch (e) {
  failed = true;
  emit({ step: 'setup', error: String(e && e.message || e), console: consoleLines.slice(-40) });
} finally {
  await browser.close();
}
if (failed) {
  emit({ step: 'console', lines: consoleLines.slice(-40) });
}
process.exit(failed ? 1 : 0);
