// The attention explorer's page (`workbook explore`) in a real headless browser (BROWSER, below)
// driven by puppeteer-core (no browser download). The page is made here by
// `workbook explore` from lab 10's reference checkpoint, which `workbook verify 10 --impl
// reference` (or the test workflow) writes; the C++ side's own numbers are the .json it writes
// beside the page, and `workbook generate` is asked for the next token independently. Labs 02, 06
// and 13's pages come from their reference verify runs (`workbook explore NN`), which the test
// workflow writes: lab 06's is cross-attention, T queries over S keys of another sequence.
//
// BROWSER: chromium (the default; Debian's /usr/bin/chromium, over CDP) or firefox (Debian's
// /usr/bin/firefox-esr, over WebDriver BiDi). explorer-firefox.test.mjs runs this suite in Firefox,
// so `node --test` runs it in both, each test named with its browser.
//
//   BUILD_DIR       the build folder (default: ../../build)
//   CHECKPOINT      lab 10's checkpoint (default: experiments/10-induction-heads/reference/checkpoint)
//   CHROMIUM        Chromium (default: /usr/bin/chromium)
//   FIREFOX         Firefox (default: /usr/bin/firefox-esr)
// The pages go to BUILD_DIR/browser-tests/BROWSER/, screenshots of each view to
// BUILD_DIR/browser-tests/screenshots/BROWSER/.
import { after, before, test as nodeTest } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const build = path.resolve(process.env.BUILD_DIR || path.join(repo, "build"));
const checkpoint = path.resolve(
  process.env.CHECKPOINT || path.join(repo, "experiments/10-induction-heads/reference/checkpoint"));
const browserName = process.env.BROWSER || "chromium";
const launchOptions = {
  chromium: { executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
              args: process.getuid && process.getuid() === 0 ? ["--no-sandbox"] : [] },
  firefox: { browser: "firefox", executablePath: process.env.FIREFOX || "/usr/bin/firefox-esr" },
}[browserName];
if (!launchOptions) throw new Error(`BROWSER=${browserName}: give chromium or firefox`);
const test = (name, ...rest) => nodeTest(`${browserName}: ${name}`, ...rest);
const outDir = path.join(build, "browser-tests", browserName);
const shots = path.join(build, "browser-tests", "screenshots", browserName);
const workbook = path.join(build, "bin/workbook");
// Lab 10's task: random tokens, then a segment repeated once (12 random, 10 twice).
const tokens = "8 23 4 55 19 30 1 42 60 11 27 36 5 40 12 7 33 21 9 50 2 61 5 40 12 7 33 21 9 50 2 61";
const ids = tokens.split(" ").map(Number);

let browser, page, data;
const problems = [];  // console errors, page errors, requests that left the file

// A new page at 1280×800 on the file `html`, with every console error and page error it reports
// collected in `errors`.
async function openPage(html) {
  const page = await browser.newPage();
  const errors = [];
  page.on("console", message => { if (message.type() === "error") errors.push(message.text()); });
  page.on("pageerror", error => errors.push(error.message));
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(pathToFileURL(html).href, { waitUntil: "load" });
  return { page, errors };
}

before(async () => {
  for (const dir of [outDir, shots]) mkdirSync(dir, { recursive: true });
  const html = path.join(outDir, "explore-lab10.html");
  execFileSync(workbook, ["explore", "--impl", "reference", "--checkpoint", checkpoint,
                          "--tokens", tokens, "--out", html], { stdio: ["ignore", "pipe", "inherit"] });
  data = JSON.parse(readFileSync(html.replace(/\.html$/, ".json"), "utf8"));  // the C++ side's
  browser = await puppeteer.launch({ ...launchOptions, headless: true });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on("console", message => { if (message.type() === "error") problems.push("console: " + message.text()); });
  page.on("pageerror", error => problems.push("page error: " + error.message));
  await page.setRequestInterception(true);
  page.on("request", request => {
    // A data: URL is the page's own (its empty favicon): Firefox reports it as a request, Chromium not.
    if (/^(file|data):/.test(request.url())) return request.continue();
    problems.push("network request: " + request.url());
    return request.abort();
  });
  await page.goto(pathToFileURL(html).href, { waitUntil: "load" });
});

after(async () => { if (browser) await browser.close(); });

const round4 = x => Math.round(x * 1e4) / 1e4;

async function selectHead(l, h, shift = false) {
  if (shift) await page.keyboard.down("Shift");
  await page.click(`.cell[data-layer="${l}"][data-head="${h}"]`);
  if (shift) await page.keyboard.up("Shift");
}
async function showDirection(direction) {  // through the page's own button
  if (await page.evaluate(() => window.explorer.state.direction) !== direction) await page.click("#direction");
  assert.equal(await page.evaluate(() => window.explorer.state.direction), direction);
}
const stripWeights = () => page.$$eval(".tok", elements => elements.map(e => Number(e.dataset.weight)));
const rankedKeysOf = tab => tab.$$eval("#ranking li", items => items.map(li => Number(li.dataset.index)));
const rankedKeys = () => rankedKeysOf(page);

test("the page loads with no console error and no network request", async () => {
  assert.equal(await page.$$eval(".tok", e => e.length), ids.length);
  assert.equal(await page.$$eval(".cell", e => e.length), data.n_layers * data.n_heads);
  await page.screenshot({ path: path.join(shots, "1-loaded.png") });
  assert.deepEqual(problems, []);
});

test("pointing at token i in head (l, h) shades exactly the keys the JSON gives, top weight first", async () => {
  await showDirection("from");
  for (const [l, h, i] of [[0, 0, 20], [1, 2, 25], [1, 3, 31], [0, 3, 0]]) {
    await selectHead(l, h);
    await page.hover(`.tok[data-index="${i}"]`);
    const expected = data.weights[l][h][i];
    const shown = await stripWeights();
    assert.deepEqual(shown, expected.map(round4), `head (${l}, ${h}), token ${i}`);
    const shaded = await page.$$eval(".tok", elements =>
      elements.map(e => e.style.background !== "" && !e.style.background.startsWith("rgb(255, 255, 255)")));
    assert.deepEqual(shaded, expected.map(w => w > 0), `shaded keys of head (${l}, ${h}), token ${i}`);
    const order = expected.map((w, s) => s).filter(s => expected[s] > 0)
      .sort((a, b) => expected[b] - expected[a] || a - b);
    assert.deepEqual(await rankedKeys(), order.slice(0, 8), `ranking of head (${l}, ${h}), token ${i}`);
    assert.equal(await page.$$eval("#headview line", lines => lines.length), order.length);
  }
  await page.screenshot({ path: path.join(shots, "2-from-a-query.png") });
});

test("pointing at a key in the head view shows the reverse: the weights to it from every query", async () => {
  await selectHead(1, 3);
  await page.hover(`#headview text[data-side="to"][data-index="5"]`);
  const column = data.weights[1][3].map(row => round4(row[5]));
  assert.deepEqual(await stripWeights(), column);
  await page.screenshot({ path: path.join(shots, "3-to-a-key.png") });
});

test("several heads: Shift+click adds a head, each drawn in its colour, the strip their mean", async () => {
  await selectHead(0, 0);
  await selectHead(1, 3, true);
  await page.hover(`#headview text[data-side="from"][data-index="27"]`);  // from token 27
  const mean = data.weights[0][0][27].map((w, s) => round4((w + data.weights[1][3][27][s]) / 2));
  const shown = await stripWeights();
  shown.forEach((w, s) => assert.ok(Math.abs(w - mean[s]) <= 1.5e-4, `key ${s}: ${w} vs ${mean[s]}`));
  const colours = await page.$$eval("#headview line", lines => new Set(lines.map(l => l.getAttribute("stroke"))).size);
  assert.equal(colours, 2);
  await page.screenshot({ path: path.join(shots, "4-two-heads.png") });
});

test("the scores table shows what the C++ side computed, and sorts", async () => {
  const rows = await page.$$eval("#scores tbody tr", trs => trs.map(tr => ({
    layer: Number(tr.dataset.layer), head: Number(tr.dataset.head),
    cells: [...tr.querySelectorAll("td[data-key]")].map(td => [td.dataset.key, td.textContent]) })));
  assert.equal(rows.length, data.scores.length);
  for (const row of rows) {
    const expected = data.scores.find(s => s.layer === row.layer && s.head === row.head);
    for (const [key, text] of row.cells)
      assert.equal(text, expected[key] === null ? "—" : expected[key].toFixed(4), `L${row.layer} H${row.head} ${key}`);
  }
  await page.click('#scores th button[data-key="induction"]');
  const sorted = await page.$$eval('#scores tbody td[data-key="induction"]', tds => tds.map(td => td.textContent));
  const expected = data.scores.map(s => s.induction).sort((a, b) => b - a).map(x => x.toFixed(4));
  assert.deepEqual(sorted, expected);
  await page.screenshot({ path: path.join(shots, "5-scores-sorted.png") });
});

test("the next-token panel is the model's distribution, and its top token is what workbook generate picks", async () => {
  for (const i of [3, 15, 24, 28]) {
    await page.hover(`.tok[data-index="${i}"]`);
    const shown = await page.$$eval("#predictions li", items => items.map(li => [
      Number(li.dataset.id), Number(li.querySelector(".value").textContent)]));
    assert.deepEqual(shown, data.predictions[i].map(p => [p.id, Number(p.probability.toFixed(4))]), `position ${i}`);
    const generated = execFileSync(workbook, ["generate", "--checkpoint", checkpoint, "--prompt",
                                              ids.slice(0, i + 1).join(" "), "--tokens", "1"], { encoding: "utf8" });
    const next = Number(/output:\s+(\d+)/.exec(generated)[1]);
    assert.equal(shown[0][0], next, `position ${i}: the panel's top token vs workbook generate`);
  }
});

test("the keyboard reaches every part: arrows move along the text, k reverses, Enter selects a head", async () => {
  await page.focus('.tok[data-index="10"]');
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.evaluate(() => window.explorer.state.pointed), 12);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.index), "12");
  const direction = await page.evaluate(() => window.explorer.state.direction);
  await page.keyboard.press("k");
  assert.equal(await page.evaluate(() => window.explorer.state.direction), direction === "from" ? "to" : "from");
  await page.keyboard.press("k");
  await page.focus('.cell[data-layer="1"][data-head="1"]');
  await page.keyboard.press("Enter");
  assert.deepEqual(await page.evaluate(() => window.explorer.state.selected), [[1, 1]]);
  assert.deepEqual(problems, []);
});

test("a lab's own run (workbook explore 02: attention alone, no predictions) loads with no error", async () => {
  const run = execFileSync(workbook, ["explore", "02", "--impl", "reference"], { encoding: "utf8" });
  const html = path.join(repo, /wrote (\S+)/.exec(run)[1]);
  const { page: lab, errors } = await openPage(html);
  const json = JSON.parse(readFileSync(path.join(path.dirname(html), "explore.json"), "utf8"));
  assert.equal(await lab.$$eval(".tok", e => e.length), json.tokens.length);
  assert.match(await lab.$eval("#predictions", e => e.textContent), /no next-token prediction/);
  await lab.hover('.tok[data-index="3"]');
  const shown = await lab.$$eval(".tok", elements => elements.map(e => Number(e.dataset.weight)));
  const [l, h] = await lab.evaluate(() => window.explorer.state.selected[0]);
  assert.deepEqual(shown, json.weights[l][h][3].map(round4));
  await lab.screenshot({ path: path.join(shots, "6-lab02-run.png") });
  assert.deepEqual(errors, []);
  await lab.close();
});

test("cross-attention (workbook explore 06): the keys are a strip of their own, the map T × S", async () => {
  const run = execFileSync(workbook, ["explore", "06", "--impl", "reference"], { encoding: "utf8" });
  const html = path.join(repo, /wrote (\S+)/.exec(run)[1]);
  const { page: lab, errors } = await openPage(html);
  const json = JSON.parse(readFileSync(path.join(path.dirname(html), "explore.json"), "utf8"));
  const T = json.tokens.length, S = json.key_tokens.length;
  assert.notEqual(T, S);  // the decoder's queries over the encoder's keys
  assert.equal(await lab.$$eval("#strip .tok", e => e.length), T);
  assert.equal(await lab.$$eval("#key-strip .tok", e => e.length), S);
  const weightsOf = strip => lab.$$eval(strip + " .tok", elements => elements.map(e => Number(e.dataset.weight)));
  const [l, h] = await lab.evaluate(() => window.explorer.state.selected[0]);
  // From query 2: the keys' strip shows its row, S weights, and the head view a line per key
  // with weight (none to a <pad> key).
  await lab.hover('#strip .tok[data-index="2"]');
  assert.equal(await lab.evaluate(() => window.explorer.state.direction), "from");
  assert.deepEqual(await weightsOf("#key-strip"), json.weights[l][h][2].map(round4));
  assert.equal(await lab.$$eval("#headview line", e => e.length), json.weights[l][h][2].filter(w => w > 0).length);
  assert.deepEqual(await rankedKeysOf(lab), json.weights[l][h][2].map((w, s) => [w, s]).filter(([w]) => w > 0)
    .sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, 8).map(([, s]) => s));
  // To key 1: the queries' strip shows its column, T weights.
  await lab.hover('#key-strip .tok[data-index="1"]');
  assert.equal(await lab.evaluate(() => window.explorer.state.direction), "to");
  assert.deepEqual(await weightsOf("#strip"), json.weights[l][h].map(row => round4(row[1])));
  // The maps are S keys wide and T queries tall; the head view has T queries and S keys.
  const [width, height] = await lab.$eval("#enlarged", c => [c.width, c.height]);
  assert.equal((width - 64) * T, (height - 64) * S);
  const [cellWidth, cellHeight] = await lab.$eval(".cell canvas", c => [c.width, c.height]);
  assert.equal(cellWidth * T, cellHeight * S);
  assert.equal(await lab.$$eval('#headview text[data-side="from"]', e => e.length), T);
  assert.equal(await lab.$$eval('#headview text[data-side="to"]', e => e.length), S);
  // The keyboard: k goes back to "from", with the pointed index a query again.
  await lab.focus('#key-strip .tok[data-index="1"]');
  await lab.keyboard.press("k");
  assert.equal(await lab.evaluate(() => window.explorer.state.direction), "from");
  assert.ok(await lab.evaluate(() => window.explorer.state.pointed) < T);
  await lab.hover('#strip .tok[data-index="2"]');
  await lab.screenshot({ path: path.join(shots, "8-lab06-cross-attention.png") });
  assert.deepEqual(errors, []);
  await lab.close();
});

test("--serve serves the page on 127.0.0.1 until Ctrl-C, and names a port in use in one line", async () => {
  const server = spawn(workbook, ["explore", "--impl", "reference", "--checkpoint", checkpoint, "--tokens", tokens,
                                  "--out", path.join(outDir, "explore-served.html"), "--serve", "--port", "0"]);
  let output = "";
  server.stdout.on("data", chunk => { output += chunk; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no URL in: " + output)), 20000);
    server.stdout.on("data", () => {
      const found = /at (http:\/\/127\.0\.0\.1:(\d+)\/)/.exec(output);
      if (found) { clearTimeout(timer); resolve(found[1]); }
    });
  });
  const served = await browser.newPage();
  const errors = [];
  served.on("pageerror", error => errors.push(error.message));
  await served.goto(url, { waitUntil: "load" });
  assert.equal(await served.$$eval(".tok", e => e.length), ids.length);
  await served.close();
  const port = /:(\d+)\//.exec(url)[1];
  const second = spawnSync(workbook, ["explore", "--impl", "reference", "--checkpoint", checkpoint, "--tokens", "1 2",
                                      "--out", path.join(outDir, "explore-second.html"), "--serve", "--port", port],
                           { encoding: "utf8", timeout: 20000 });
  assert.equal(second.status, 3);
  assert.match(second.stderr, /cannot listen on 127\.0\.0\.1:\d+ \(is the port in use\?\)/);
  assert.equal(second.stderr.trim().split("\n").length, 1);
  const exit = new Promise(resolve => server.on("exit", (code, signal) => resolve([code, signal])));
  server.kill("SIGINT");
  assert.deepEqual(await exit, [0, null]);
  assert.match(output, /stopped serving/);
  assert.deepEqual(errors, []);
});

// Lab 13's GPT on a verse of the King James Bible, when a lab 13 checkpoint is there (`workbook
// verify 13 --impl reference` writes one, the test workflow's short run one in short/;
// CHECKPOINT13 names another).
const lab13 = path.join(repo, "experiments/13-gpt/reference");
const lab13Run = existsSync(path.join(lab13, "explore.json")) ? lab13 : path.join(lab13, "short");
const checkpoint13 = path.resolve(process.env.CHECKPOINT13 || path.join(lab13Run, "checkpoint"));
const verse = "And Boaz begat Obed, and Obed begat Jesse, and Jesse begat David.";
test("lab 13's GPT: the verse as its BPE tokens, and the next token as workbook generate picks it greedily",
     { skip: !existsSync(path.join(checkpoint13, "config.json")) && "no lab 13 checkpoint" }, async () => {
  const html = path.join(outDir, "explore-lab13.html");
  execFileSync(workbook, ["explore", "--impl", "reference", "--checkpoint", checkpoint13, "--text", verse,
                          "--out", html], { stdio: ["ignore", "pipe", "inherit"] });
  const json = JSON.parse(readFileSync(html.replace(/\.html$/, ".json"), "utf8"));
  // The BPE tokens give back the text byte for byte, or its start when the model's context is
  // shorter (a short-mode model's), which the page says.
  const shownText = json.tokens.join("");
  let last = json.tokens.length - 1;  // the position whose next token generate is asked for
  if (shownText !== verse) {
    assert.ok(verse.startsWith(shownText), shownText);
    assert.match(json.notes.join(" "), /only the first \d+ are shown/);
    // A prompt generate accepts (shorter than the context) that ends where a word does, so that it
    // encodes to the same tokens.
    last--;
    while (last > 0 && !json.tokens[last + 1].startsWith(" ")) last--;
  }
  const prompt = json.tokens.slice(0, last + 1).join("");
  const { page: gpt, errors } = await openPage(html);
  const shown = await gpt.$$eval(".tok", elements => elements.map(e => e.textContent));
  assert.deepEqual(shown, json.tokens.map(t => t.replace(/ /g, "·")));  // spaces visible
  await gpt.hover(`.tok[data-index="${last}"]`);
  const top = await gpt.$eval("#predictions li", li => Number(li.dataset.id));
  assert.equal(top, json.predictions[last][0].id);
  const generated = execFileSync(workbook, ["generate", "--checkpoint", checkpoint13, "--prompt", prompt,
                                            "--temperature", "0", "--max-new", "1"], { encoding: "utf8" });
  assert.equal(generated, prompt + json.predictions[last][0].text + "\n");
  await gpt.screenshot({ path: path.join(shots, "7-lab13-verse.png") });
  assert.deepEqual(errors, []);
  await gpt.close();
});

// Lab 13's own verify run (`workbook explore 13`): its held-out verse with next-token predictions,
// from the same code as `workbook explore --checkpoint` (workbench/explore/gpt_page.cpp).
const lab13Data = path.join(lab13Run, "explore.json");
test("lab 13's verify run (workbook explore 13): the held-out verse, each position's next tokens",
     { skip: !existsSync(lab13Data) && "no lab 13 verify run" }, async () => {
  const run = execFileSync(workbook, ["explore", "13", "--impl", "reference"], { encoding: "utf8" });
  const html = path.join(repo, /wrote (\S+)/.exec(run)[1]);
  const json = JSON.parse(readFileSync(lab13Data, "utf8"));
  assert.equal(json.predictions.length, json.tokens.length);
  const { page: gpt, errors } = await openPage(html);
  assert.equal(await gpt.$$eval(".tok", e => e.length), json.tokens.length);
  assert.equal(await gpt.$eval("#key-strip", e => getComputedStyle(e).display), "none");  // one strip
  await gpt.hover('.tok[data-index="1"]');
  assert.deepEqual(await gpt.$$eval("#predictions li", items => items.map(li => Number(li.dataset.id))),
                   json.predictions[1].map(p => p.id));
  await gpt.screenshot({ path: path.join(shots, "9-lab13-verify-run.png") });
  assert.deepEqual(errors, []);
  await gpt.close();
});
