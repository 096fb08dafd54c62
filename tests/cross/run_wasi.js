// run_wasi.js — runs one wasm32-wasi program under node's WASI, the way
// tests/run.sh runs a native test: `node run_wasi.js prog.wasm [args...]`.
// The current directory is preopened as "." (and "/"), so a test that opens
// tests/ref/data/... relative to the repository root finds it. The exit code
// is the program's; a trap prints its message and exits 134, like an abort.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
// Node 20 can crash in a WASI call after memory.grow; the
// crash is in V8's fast API calls, so turn them off before any WASI call.
require('node:v8').setFlagsFromString('--no-turbo-fast-api-calls');
const { WASI } = require('node:wasi');

const file = process.argv[2];
if (!file) {
    process.stderr.write('usage: node run_wasi.js prog.wasm [args...]\n');
    process.exit(2);
}
const wasi = new WASI({
    version: 'preview1',
    args: [path.basename(file, '.wasm'), ...process.argv.slice(3)],
    env: { KILN_LOGS: process.env.KILN_LOGS || '' },
    preopens: { '.': process.cwd(), '/': process.cwd() },
    returnOnExit: true,
});

let code;
try {
    const mod = new WebAssembly.Module(fs.readFileSync(file));
    const inst = new WebAssembly.Instance(mod, { wasi_snapshot_preview1: wasi.wasiImport });
    code = wasi.start(inst);
} catch (e) {
    process.stderr.write(`${file}: ${e && e.stack ? e.stack : e}\n`);
    code = 134;
}
process.exitCode = code;
