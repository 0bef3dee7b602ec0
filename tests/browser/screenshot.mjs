// A screenshot of an explorer page at 1280×800 in headless chromium, as the README's:
//   node tests/browser/screenshot.mjs PAGE.html OUT.png [--point I] [--heads L.H,L.H] [--direction to]
// --point: the pointed token; --heads: the selected heads, the first enlarged.
import path from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const [pagePath, out, ...rest] = process.argv.slice(2);
if (!pagePath || !out) {
  console.error("usage: node screenshot.mjs PAGE.html OUT.png [--point I] [--heads L.H,L.H] [--direction to]");
  process.exit(2);
}
const option = name => { const i = rest.indexOf(name); return i >= 0 ? rest[i + 1] : undefined; };
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: process.getuid && process.getuid() === 0 ? ["--no-sandbox"] : [],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(pathToFileURL(path.resolve(pagePath)).href, { waitUntil: "load" });
  const heads = (option("--heads") || "").split(",").filter(Boolean).map(h => h.split(".").map(Number));
  await page.evaluate((heads, point, direction) => {
    heads.forEach(([l, h], k) => window.explorer.chooseHead(l, h, k > 0));
    if (heads.length) window.explorer.state.enlarged = heads[0];
    const state = window.explorer.state;
    window.explorer.point(point === undefined ? state.pointed : Number(point), direction || state.direction);
  }, heads, option("--point"), option("--direction"));
  await page.screenshot({ path: out });
  console.log("wrote " + out);
} finally {
  await browser.close();
}
