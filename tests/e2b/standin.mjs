// A stand-in E2B gateway on loopback: the control-plane REST API and envd (Connect-RPC over
// HTTP/1.1 plus /files and /health) on one port, implementing the subset listed in
// e2b-protocol.md §10. Commands run as real processes (each in its own process group) in a
// per-sandbox home directory under --root. No dependencies beyond Node 20.
//
// node standin.mjs --root DIR --port-file FILE [--api-key-env VAR] [--log FILE]
// STANDIN_FAULTS='{"POST /v2/sandboxes":[{"status":500,"create":true}]}' injects answers:
// each listed entry is used once, by the next request of that "METHOD /path" (ids as *).
// {"drop":MS} on "POST /process.Process/Start" cuts the stream MS after it started.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';

const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : def;
};
const ROOT = path.resolve(opt('root', fs.mkdtempSync('/tmp/e2b-standin-')));
// The key comes from the environment variable --api-key-env names (never the command line).
const API_KEY = process.env[opt('api-key-env', 'E2B_API_KEY')] || 'e2b_standin';
const LOG = opt('log', null);
const ENVD_VERSION = '0.5.7';
const faults = JSON.parse(process.env.STANDIN_FAULTS || '{}');
fs.mkdirSync(ROOT, { recursive: true });

const sandboxes = new Map();

const log = (line) => { if (LOG) fs.appendFileSync(LOG, line + '\n'); };
const rand = (n) => {
  const abc = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (const b of crypto.randomBytes(n)) s += abc[b % abc.length];
  return s;
};

function sendJson(res, status, obj, headers = {}) {
  const body = obj === undefined ? '' : JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
const apiError = (res, status, message, headers) => sendJson(res, status, { code: status, message }, headers);
const HTTP_OF = { canceled: 499, unknown: 500, invalid_argument: 400, deadline_exceeded: 504, not_found: 404,
  already_exists: 409, permission_denied: 403, resource_exhausted: 429, failed_precondition: 400, aborted: 409,
  out_of_range: 400, unimplemented: 501, internal: 500, unavailable: 503, data_loss: 500, unauthenticated: 401 };
const rpcError = (res, code, message) => sendJson(res, HTTP_OF[code] || 500, { code, message, details: [] });

function frame(flags, obj) {
  const body = Buffer.from(JSON.stringify(obj));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

function takeFault(method, pathname) {
  const key = `${method} ${pathname.replace(/\/sandboxes\/[a-z0-9]+/, '/sandboxes/*')}`;
  const q = faults[key];
  return q && q.length ? q.shift() : null;
}

// ---------------------------------------------------------------- control plane

function sandboxJson(s) {
  return { templateID: s.templateID, sandboxID: s.id, alias: s.templateID, clientID: 'standin',
    envdVersion: ENVD_VERSION, envdAccessToken: s.token, trafficAccessToken: null, domain: null };
}
function detailJson(s) {
  return { templateID: s.templateID, sandboxID: s.id, alias: s.templateID, clientID: 'standin',
    startedAt: s.startedAt.toISOString(), endAt: new Date(s.endAt).toISOString(), cpuCount: 2,
    memoryMB: 512, diskSizeMB: 1024, state: s.state, envdVersion: ENVD_VERSION,
    envdAccessToken: s.token, allowInternetAccess: s.allowInternet, domain: null, metadata: s.metadata };
}

function createSandbox(body) {
  const id = rand(20);
  const home = path.join(ROOT, id, 'home');
  fs.mkdirSync(home, { recursive: true });
  const timeout = Number.isInteger(body.timeout) ? body.timeout : 300;
  const s = { id, templateID: body.templateID, token: crypto.randomBytes(16).toString('hex'), home,
    metadata: body.metadata || {}, envs: body.envVars || {}, state: 'running', startedAt: new Date(),
    endAt: Date.now() + timeout * 1000, allowInternet: body.allow_internet_access ?? null,
    procs: new Map(), exited: new Map() };
  sandboxes.set(id, s);
  return s;
}

// Every process of a sandbox, as its VM would hold them: whatever carries the sandbox's
// E2B_SANDBOX_ID (envd puts it in each process's environment, and children inherit it),
// including what a command left behind in a session of its own.
function sandboxPids(s) {
  const want = Buffer.from(`\0E2B_SANDBOX_ID=${s.id}\0`);
  const pids = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    let env;
    try { env = fs.readFileSync(`/proc/${name}/environ`); } catch { continue; }
    if (Buffer.concat([Buffer.from([0]), env]).includes(want)) pids.push(Number(name));
  }
  return pids;
}

function killSandbox(s) {
  // Until a pass finds none: a process may fork while the pass runs.
  for (let pass = 0; pass < 50; pass++) {
    const pids = sandboxPids(s);
    if (!pids.length) break;
    for (const pid of pids) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      try { process.kill(pid, 'SIGCONT'); } catch { /* gone */ }
    }
  }
  sandboxes.delete(s.id);
  fs.rmSync(path.join(ROOT, s.id), { recursive: true, force: true });
}

// Pause freezes the whole VM: every process of the sandbox.
function signalAll(s, sig) {
  for (const pid of sandboxPids(s)) { try { process.kill(pid, sig); } catch { /* gone */ } }
}

setInterval(() => {
  for (const s of sandboxes.values()) if (Date.now() > s.endAt) killSandbox(s);
}, 1000).unref();

function api(req, res, url, body) {
  if (req.headers['x-api-key'] !== API_KEY) return apiError(res, 401, 'Invalid API key');
  const p = url.pathname;
  let m;
  let json = {};
  if (body.length) {
    try { json = JSON.parse(body.toString()); } catch { return apiError(res, 400, 'body is not JSON'); }
  }
  if (req.method === 'POST' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    if (typeof json.templateID !== 'string' || !json.templateID) return apiError(res, 400, 'templateID is required');
    if (json.templateID === 'missing') return apiError(res, 404, `template '${json.templateID}' not found`);
    return sendJson(res, 201, sandboxJson(createSandbox(json)));
  }
  if (req.method === 'GET' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    const want = new URLSearchParams(url.searchParams.get('metadata') || '');
    const states = (url.searchParams.get('state') || 'running,paused').split(',');
    const out = [];
    for (const s of sandboxes.values()) {
      if (!states.includes(s.state)) continue;
      let ok = true;
      for (const [k, v] of want) if (s.metadata[k] !== v) ok = false;
      if (!ok) continue;
      const d = detailJson(s);
      delete d.envdAccessToken;
      delete d.domain;
      out.push(d);
    }
    return sendJson(res, 200, out);
  }
  if ((m = p.match(/^\/(v2\/)?sandboxes\/([^/]+)(\/[a-z]+)?$/))) {
    const s = sandboxes.get(m[2]);
    const op = m[3] || '';
    if (!s) return apiError(res, 404, `sandbox "${m[2]}" not found`);
    const extend = (sec) => { s.endAt = Math.max(s.endAt, Date.now() + sec * 1000); };
    if (req.method === 'GET' && op === '') return sendJson(res, 200, detailJson(s));
    if (req.method === 'DELETE' && op === '') { killSandbox(s); res.writeHead(204); return res.end(); }
    if (req.method === 'POST' && op === '/timeout') {
      if (!Number.isInteger(json.timeout)) return apiError(res, 400, 'timeout is required');
      s.endAt = Date.now() + json.timeout * 1000; res.writeHead(204); return res.end();
    }
    if (req.method === 'POST' && op === '/refreshes') { extend(json.duration || 60); res.writeHead(204); return res.end(); }
    if (req.method === 'POST' && op === '/pause') {
      if (s.state === 'paused') return apiError(res, 409, `sandbox "${s.id}" is already paused`);
      s.state = 'paused'; signalAll(s, 'SIGSTOP'); res.writeHead(204); return res.end();
    }
    if (req.method === 'POST' && (op === '/connect' || op === '/resume')) {
      if (op === '/resume' && s.state === 'running') return apiError(res, 409, `sandbox "${s.id}" is running`);
      const resumed = s.state === 'paused';
      if (resumed) { s.state = 'running'; signalAll(s, 'SIGCONT'); }
      extend(Number.isInteger(json.timeout) ? json.timeout : 300);
      return sendJson(res, resumed || op === '/resume' ? 201 : 200, sandboxJson(s));
    }
  }
  return apiError(res, 404, `no route ${req.method} ${p}`);
}

// ---------------------------------------------------------------- data plane

const GO_SIGNAL = { SIGHUP: 'hangup', SIGINT: 'interrupt', SIGQUIT: 'quit', SIGILL: 'illegal instruction',
  SIGTRAP: 'trace/breakpoint trap', SIGABRT: 'aborted', SIGBUS: 'bus error', SIGFPE: 'floating point exception',
  SIGKILL: 'killed', SIGUSR1: 'user defined signal 1', SIGSEGV: 'segmentation fault',
  SIGUSR2: 'user defined signal 2', SIGPIPE: 'broken pipe', SIGALRM: 'alarm clock', SIGTERM: 'terminated' };

function resolvePath(s, p) {
  if (typeof p !== 'string' || p === '') return s.home;
  return path.isAbsolute(p) ? path.normalize(p) : path.join(s.home, p);
}

// Go's os.FileMode.String() of what lstat found: type letters ("dalTLDpSugct?" order) or
// '-', then rwx bits ("prw-r--r--" a FIFO, "Dcrw-rw-rw-" a character device).
function goMode(st) {
  let t = '';
  if (st.isDirectory()) t += 'd';
  if (st.isSymbolicLink()) t += 'L';
  if (st.isBlockDevice() || st.isCharacterDevice()) t += 'D';
  if (st.isFIFO()) t += 'p';
  if (st.isSocket()) t += 'S';
  if (st.mode & 0o4000) t += 'u';
  if (st.mode & 0o2000) t += 'g';
  if (st.isCharacterDevice()) t += 'c';
  if (st.mode & 0o1000) t += 't';
  let perms = t || '-';
  for (let i = 8; i >= 0; i--) perms += st.mode & (1 << i) ? 'rwxrwxrwx'[8 - i] : '-';
  return perms;
}

// envd's EntryInfo (shared/pkg/filesystem GetEntryInfo): from lstat, but a symlink takes its
// resolved target's type and permission bits, and symlinkTarget is that resolved path (the
// link's own path when it cannot be resolved; the type is then unspecified). Mode holds
// permission bits only; anything but a file or folder is FILE_TYPE_UNSPECIFIED.
function entryInfo(full) {
  const st = fs.lstatSync(full);
  let target = null;
  let tst = st;
  if (st.isSymbolicLink()) {
    try { target = fs.realpathSync(full); } catch { target = full; }
    try { tst = fs.statSync(target); } catch { tst = null; }
  }
  const type = !tst ? 'FILE_TYPE_UNSPECIFIED' : tst.isFile() ? 'FILE_TYPE_FILE'
    : tst.isDirectory() ? 'FILE_TYPE_DIRECTORY' : 'FILE_TYPE_UNSPECIFIED';
  const e = { name: path.basename(full), type, path: full, size: String(st.size), mode: tst ? tst.mode & 0o777 : 0,
    permissions: goMode(st), owner: 'user', group: 'user', modifiedTime: st.mtime.toISOString() };
  if (target !== null) e.symlinkTarget = target;
  return e;
}

function endEvent(code, signal) {
  if (signal) {
    const name = GO_SIGNAL[signal] || signal;
    return { exitCode: -1, status: `signal: ${name}`, error: `signal: ${name}` };
  }
  if (code === 0) return { exited: true, status: 'exit status 0' };
  return { exitCode: code, exited: true, status: `exit status ${code}`, error: `exit status ${code}` };
}

function subscribe(p, res, keepaliveS) {
  p.subs.add(res);
  const t = setInterval(() => res.write(frame(0, { event: { keepalive: {} } })), keepaliveS * 1000);
  const done = () => { clearInterval(t); p.subs.delete(res); };
  res.on('close', done);
  res.on('finish', done);
}

function startStream(res) {
  res.writeHead(200, { 'Content-Type': 'application/connect+json' });
}
const endStream = (res, error) => res.end(frame(2, error ? { error } : {}));

function startProcess(s, req, res, msg) {
  const cfg = msg.process || {};
  const cwd = resolvePath(s, cfg.cwd);
  if (!fs.existsSync(cwd)) {
    startStream(res);
    return endStream(res, { code: 'invalid_argument', message: `cwd '${cfg.cwd}' does not exist` });
  }
  const env = { PATH: process.env.PATH || '/usr/bin:/bin', HOME: s.home, USER: 'user', LOGNAME: 'user',
    E2B_SANDBOX: 'true', E2B_SANDBOX_ID: s.id, E2B_TEMPLATE_ID: s.templateID,
    ...s.envs, ...(cfg.envs || {}) };
  const useStdin = msg.stdin !== false;
  let child;
  try {
    child = spawn(cfg.cmd, cfg.args || [], { cwd, env, detached: true, stdio: [useStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  } catch (e) {
    startStream(res);
    return endStream(res, { code: 'invalid_argument', message: String(e.message) });
  }
  const p = { child, config: cfg, tag: msg.tag, subs: new Set(), pid: child.pid };
  startStream(res);
  child.on('error', (e) => {
    for (const r of p.subs) { r.write(frame(0, { event: { end: { exitCode: -1, status: 'error', error: e.message } } })); endStream(r); }
    s.procs.delete(p.pid);
  });
  if (!child.pid) return;
  s.procs.set(p.pid, p);
  const ka = Number(req.headers['keepalive-ping-interval']) || 90;
  res.write(frame(0, { event: { start: { pid: p.pid } } }));
  subscribe(p, res, ka);
  const emit = (name) => (chunk) => {
    const f = frame(0, { event: { data: { [name]: chunk.toString('base64') } } });
    for (const r of p.subs) r.write(f);
  };
  child.stdout.on('data', emit('stdout'));
  child.stderr.on('data', emit('stderr'));
  const limit = Number(req.headers['connect-timeout-ms']) || 0;
  const timer = limit > 0 ? setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, limit) : null;
  child.on('close', (code, signal) => {
    if (timer) clearTimeout(timer);
    const end = endEvent(code, signal);
    s.procs.delete(p.pid);
    s.exited.set(p.pid, { end, tag: p.tag });
    setTimeout(() => s.exited.delete(p.pid), 30000).unref();
    for (const r of p.subs) { r.write(frame(0, { event: { end } })); endStream(r); }
  });
  const fault = takeFault('POST', '/process.Process/Start');
  if (fault && fault.drop !== undefined) setTimeout(() => res.socket && res.socket.destroy(), fault.drop);
}

function findProc(s, sel) {
  if (!sel) return null;
  if (sel.pid !== undefined) return { live: s.procs.get(Number(sel.pid)), gone: s.exited.get(Number(sel.pid)) };
  for (const p of s.procs.values()) if (p.tag === sel.tag) return { live: p };
  return { live: null };
}

function processRpc(s, req, res, method, msg) {
  const sel = msg.process;
  const what = sel && sel.pid !== undefined ? `process with pid ${sel.pid} not found` : `process with tag ${sel && sel.tag} not found`;
  if (method === 'Start') return startProcess(s, req, res, msg);
  if (method === 'Connect') {
    const f = findProc(s, sel) || {};
    startStream(res);
    if (f.live) {
      res.write(frame(0, { event: { start: { pid: f.live.pid } } }));
      return subscribe(f.live, res, Number(req.headers['keepalive-ping-interval']) || 90);
    }
    if (f.gone) {
      res.write(frame(0, { event: { start: { pid: Number(sel.pid) } } }));
      res.write(frame(0, { event: { end: f.gone.end } }));
      return endStream(res);
    }
    return endStream(res, { code: 'not_found', message: what });
  }
  if (method === 'List') {
    const processes = [...s.procs.values()].map((p) => ({ config: p.config, pid: p.pid, ...(p.tag ? { tag: p.tag } : {}) }));
    return sendJson(res, 200, { processes });
  }
  const f = findProc(s, sel);
  if (!f) return rpcError(res, 'unimplemented', 'bad process selector');
  if (!f.live) return rpcError(res, 'not_found', what);
  const p = f.live;
  if (method === 'SendInput') {
    if (!p.child.stdin) return rpcError(res, 'failed_precondition', 'stdin is not enabled');
    p.child.stdin.write(Buffer.from((msg.input && msg.input.stdin) || '', 'base64'));
    return sendJson(res, 200, {});
  }
  if (method === 'CloseStdin') {
    if (p.child.stdin) p.child.stdin.end();
    return sendJson(res, 200, {});
  }
  if (method === 'SendSignal') {
    const sig = msg.signal === 'SIGNAL_SIGTERM' || msg.signal === 15 ? 'SIGTERM' : 'SIGKILL';
    try { process.kill(p.pid, sig); } catch { /* gone */ }
    return sendJson(res, 200, {});
  }
  if (method === 'Update') return sendJson(res, 200, {});
  return rpcError(res, 'unimplemented', `process.Process/${method} is not implemented`);
}

function filesystemRpc(s, res, method, msg) {
  try {
    if (method === 'Stat') {
      const full = resolvePath(s, msg.path);
      if (!fs.existsSync(full) && !isLink(full)) return rpcError(res, 'not_found', `path '${msg.path}' does not exist`);
      return sendJson(res, 200, { entry: entryInfo(full) });
    }
    if (method === 'ListDir') {
      const full = resolvePath(s, msg.path);
      if (!fs.existsSync(full)) return rpcError(res, 'not_found', `path '${msg.path}' does not exist`);
      if (!fs.statSync(full).isDirectory()) return rpcError(res, 'invalid_argument', `path '${msg.path}' is not a directory`);
      const depth = Math.max(1, Number(msg.depth) || 1);
      const entries = [];
      const walk = (dir, d) => {
        for (const name of fs.readdirSync(dir).sort()) {
          const f = path.join(dir, name);
          const e = entryInfo(f);
          entries.push(e);
          if (d < depth && e.type === 'FILE_TYPE_DIRECTORY') walk(f, d + 1);
        }
      };
      walk(full, 1);
      return sendJson(res, 200, { entries });
    }
    if (method === 'MakeDir') {
      const full = resolvePath(s, msg.path);
      if (fs.existsSync(full)) return rpcError(res, 'already_exists', `path '${msg.path}' already exists`);
      fs.mkdirSync(full, { recursive: true });
      return sendJson(res, 200, { entry: entryInfo(full) });
    }
    if (method === 'Remove') {
      fs.rmSync(resolvePath(s, msg.path), { recursive: true, force: true });
      return sendJson(res, 200, {});
    }
    if (method === 'Move') {
      const src = resolvePath(s, msg.source);
      const dst = resolvePath(s, msg.destination);
      if (!fs.existsSync(src)) return rpcError(res, 'not_found', `path '${msg.source}' does not exist`);
      fs.mkdirSync(path.dirname(dst), { recursive: true });
      fs.renameSync(src, dst);
      return sendJson(res, 200, { entry: entryInfo(dst) });
    }
  } catch (e) {
    return rpcError(res, 'internal', e.message);
  }
  return rpcError(res, 'unimplemented', `filesystem.Filesystem/${method} is not implemented`);
}
const isLink = (f) => { try { return fs.lstatSync(f).isSymbolicLink(); } catch { return false; } };

function signatureOk(s, url, op) {
  const sig = url.searchParams.get('signature');
  if (!sig) return false;
  const p = url.searchParams.get('path') || '';
  const user = url.searchParams.get('username') || '';
  const exp = url.searchParams.get('signature_expiration');
  if (exp && Number(exp) < Date.now() / 1000) return false;
  const raw = `${p}:${op}:${user}:${s.token}${exp ? `:${exp}` : ''}`;
  const want = 'v1_' + crypto.createHash('sha256').update(raw).digest('base64').replace(/=+$/, '');
  return sig === want;
}

function parseMultipart(body, contentType) {
  const m = contentType.match(/boundary=(?:"([^"]+)"|([^;]+))/);
  if (!m) return null;
  const boundary = Buffer.from(`--${m[1] || m[2]}`);
  const parts = [];
  let pos = body.indexOf(boundary);
  while (pos >= 0) {
    pos += boundary.length;
    if (body.slice(pos, pos + 2).toString() === '--') break;
    pos += 2; // CRLF
    const headEnd = body.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) break;
    const head = body.slice(pos, headEnd).toString();
    const next = body.indexOf(boundary, headEnd + 4);
    if (next < 0) break;
    const data = body.slice(headEnd + 4, next - 2);
    const fn = head.match(/filename="([^"]*)"/);
    parts.push({ filename: fn ? fn[1] : '', data });
    pos = next;
  }
  return parts;
}

function files(s, req, res, url, body) {
  const qpath = url.searchParams.get('path');
  if (req.method === 'GET') {
    const full = resolvePath(s, qpath);
    if (!fs.existsSync(full)) return apiError(res, 404, `path '${qpath}' does not exist`);
    if (fs.statSync(full).isDirectory()) return apiError(res, 400, `path '${qpath}' is a directory`);
    const data = fs.readFileSync(full);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': data.length,
      'Content-Disposition': `inline; filename=${path.basename(full)}` });
    return res.end(data);
  }
  if (req.method === 'POST') {
    const ct = req.headers['content-type'] || '';
    let items;
    if (ct.startsWith('multipart/form-data')) {
      const parts = parseMultipart(body, ct);
      if (!parts) return apiError(res, 400, 'malformed multipart body');
      items = parts.map((p) => ({ target: qpath || p.filename, data: p.data }));
    } else {
      if (!qpath) return apiError(res, 400, 'path is required for an octet-stream upload');
      items = [{ target: qpath, data: body }];
    }
    const out = [];
    try {
      for (const it of items) {
        const full = resolvePath(s, it.target);
        if (fs.existsSync(full) && fs.statSync(full).isDirectory()) return apiError(res, 400, `path '${it.target}' is a directory`);
        fs.mkdirSync(path.dirname(full), { recursive: true });
        fs.writeFileSync(full, it.data, { mode: 0o644 });
        out.push({ path: full, name: path.basename(full), type: 'file' });
      }
    } catch (e) {
      return apiError(res, 500, e.message);
    }
    return sendJson(res, 200, out);
  }
  return apiError(res, 405, 'method not allowed');
}

function envd(req, res, url, body) {
  let id = req.headers['e2b-sandbox-id'];
  if (!id) {
    const m = (req.headers.host || '').match(/^(\d+)-([a-z0-9]+)\./);
    if (m) id = m[2];
  }
  const s = id && sandboxes.get(id);
  if (!s || s.state !== 'running') return apiError(res, 502, `sandbox '${id}' is not running or not found`);
  const p = url.pathname;
  if (p === '/health') { res.writeHead(204); return res.end(); }
  const tokenOk = req.headers['x-access-token'] === s.token;
  if (p === '/files') {
    if (!tokenOk && !signatureOk(s, url, req.method === 'GET' ? 'read' : 'write'))
      return apiError(res, 401, 'unauthorized access, please provide a valid access token or method signing if supported');
    return files(s, req, res, url, body);
  }
  if (!tokenOk) return rpcError(res, 'unauthenticated', 'unauthorized access, please provide a valid access token');
  const auth = req.headers.authorization;
  if (auth && auth.startsWith('Basic ')) {
    const user = Buffer.from(auth.slice(6), 'base64').toString().split(':')[0];
    if (!['user', 'root'].includes(user)) return rpcError(res, 'unauthenticated', `invalid username: '${user}'`);
  }
  const m = p.match(/^\/(process\.Process|filesystem\.Filesystem)\/([A-Za-z]+)$/);
  if (!m) return apiError(res, 404, `no route ${p}`);
  const streaming = ['Start', 'Connect', 'WatchDir'].includes(m[2]);
  let msg;
  try {
    if (streaming) {
      if (body.length < 5 || body[0] !== 0) throw new Error('bad envelope');
      const len = body.readUInt32BE(1);
      msg = JSON.parse(body.slice(5, 5 + len).toString());
    } else {
      msg = body.length ? JSON.parse(body.toString()) : {};
    }
  } catch (e) {
    return rpcError(res, 'invalid_argument', `malformed request: ${e.message}`);
  }
  if (m[1] === 'process.Process') return processRpc(s, req, res, m[2], msg);
  return filesystemRpc(s, res, m[2], msg);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const url = new URL(req.url, 'http://standin');
    const isEnvd = req.headers['e2b-sandbox-id'] || /^\/(process\.|filesystem\.|files$|health$)/.test(url.pathname);
    log(`> ${req.method} ${url.pathname}`);
    res.on('finish', () => log(`${req.method} ${url.pathname} ${res.statusCode}`));
    const fault = url.pathname === '/process.Process/Start' ? null : takeFault(req.method, url.pathname);
    if (fault) {
      if (fault.create) createSandbox(JSON.parse(body.toString() || '{}'));
      const h = fault.retryAfter !== undefined ? { 'Retry-After': String(fault.retryAfter) } : {};
      return apiError(res, fault.status, 'injected fault', h);
    }
    try {
      if (isEnvd) return envd(req, res, url, body);
      return api(req, res, url, body);
    } catch (e) {
      if (!res.headersSent) apiError(res, 500, e.message);
      else res.destroy();
    }
  });
});
server.keepAliveTimeout = 30000;
server.listen(Number(opt('port', 0)), '127.0.0.1', () => {
  const port = server.address().port;
  const pf = opt('port-file', null);
  if (pf) {
    fs.writeFileSync(pf + '.tmp', String(port));
    fs.renameSync(pf + '.tmp', pf);
  } else {
    console.log(port);
  }
});
const stop = () => {
  for (const s of [...sandboxes.values()]) killSandbox(s);
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
