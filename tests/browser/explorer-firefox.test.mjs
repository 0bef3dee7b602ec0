// The explorer's browser tests (explorer.test.mjs) in Firefox ESR, driven over WebDriver BiDi.
// `node --test` runs each test file in a process of its own, so BROWSER is this file's alone.
process.env.BROWSER = "firefox";
await import("./explorer.test.mjs");
