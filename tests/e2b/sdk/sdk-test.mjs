// The official e2b SDK (pinned in package.json) against the stand-in gateway: proof that the
// stand-in speaks what the SDK expects. Usage: node sdk-test.mjs PORT_FILE (E2B_API_KEY set).
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { Sandbox, CommandExitError, NotFoundError } from 'e2b';

const port = fs.readFileSync(process.argv[2], 'utf8').trim();
process.env.E2B_API_URL = `http://127.0.0.1:${port}`;
process.env.E2B_SANDBOX_URL = `http://127.0.0.1:${port}`;
delete process.env.E2B_DEBUG;

const sbx = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { purpose: 'sdk-proof' }, envs: { FOO: 'bar' } });
assert.match(sbx.sandboxId, /^[a-z0-9]{20}$/);
try {
  assert.equal(await sbx.isRunning(), true);

  let r = await sbx.commands.run('echo hello; echo warn >&2; echo $FOO');
  assert.deepEqual([r.exitCode, r.stdout, r.stderr], [0, 'hello\nbar\n', 'warn\n']);

  await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) =>
    e instanceof CommandExitError && e.exitCode === 3 && e.stdout === 'partial\n');

  r = await sbx.commands.run('pwd; echo $A', { cwd: 'sub', envs: { A: '1' } }).catch((e) => e);
  assert.ok(r instanceof Error, 'a missing cwd is refused');
  await sbx.files.makeDir('sub');
  r = await sbx.commands.run('basename "$(pwd)"; echo $A', { cwd: 'sub', envs: { A: '1' } });
  assert.equal(r.stdout, 'sub\n1\n');

  // Background, disconnect, reattach by pid: the exit code still arrives.
  const h = await sbx.commands.run('sleep 1; echo done; exit 5', { background: true });
  assert.ok(h.pid > 0);
  await h.disconnect();
  const h2 = await sbx.commands.connect(h.pid);
  await assert.rejects(h2.wait(), (e) => e instanceof CommandExitError && e.exitCode === 5);
  await assert.rejects(sbx.commands.connect(999999), NotFoundError);

  // stdin through SendInput and CloseStdin.
  const c = await sbx.commands.run('cat', { background: true, stdin: true });
  await sbx.commands.sendStdin(c.pid, 'hi\n');
  await sbx.commands.closeStdin(c.pid);
  r = await c.wait();
  assert.equal(r.stdout, 'hi\n');

  // kill(pid) of a running command, and of one that is gone.
  const k = await sbx.commands.run('sleep 30', { background: true });
  assert.ok((await sbx.commands.list()).some((p) => p.pid === k.pid));
  assert.equal(await sbx.commands.kill(k.pid), true);
  await assert.rejects(k.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
  assert.equal(await sbx.commands.kill(999999), false);

  // Files: multipart, octet-stream, several at once, read, list, exists, remove.
  await sbx.files.write('x.txt', 'hello');
  await sbx.files.write('rel.bin', new Uint8Array([0, 1, 2, 255]), { useOctetStream: true });
  await sbx.files.write([{ path: 'm/a.txt', data: 'A' }, { path: 'm/b.txt', data: 'B' }]);
  assert.equal(await sbx.files.read('x.txt'), 'hello');
  assert.deepEqual([...(await sbx.files.read('rel.bin', { format: 'bytes' }))], [0, 1, 2, 255]);
  assert.deepEqual((await sbx.files.list('m')).map((e) => [e.name, e.type]), [['a.txt', 'file'], ['b.txt', 'file']]);
  assert.equal(await sbx.files.exists('nope'), false);
  await assert.rejects(sbx.files.read('nope'));
  await sbx.files.remove('m/a.txt');
  assert.equal(await sbx.files.exists('m/a.txt'), false);

  // Control plane: info, list by metadata, timeout, pause and resume through connect.
  const info = await sbx.getInfo();
  assert.equal(info.state, 'running');
  assert.equal(info.metadata.purpose, 'sdk-proof');
  const page = await Sandbox.list({ query: { metadata: { purpose: 'sdk-proof' } } }).nextItems();
  assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId]);
  await sbx.setTimeout(60_000);
  await sbx.pause();
  assert.equal((await sbx.getInfo()).state, 'paused');
  const again = await Sandbox.connect(sbx.sandboxId);
  assert.equal((await again.getInfo()).state, 'running');
  assert.equal((await again.commands.run('echo back')).stdout, 'back\n');
} finally {
  assert.equal(await sbx.kill(), true);
}
assert.equal(await Sandbox.kill(sbx.sandboxId), false);
console.log('e2b SDK against the stand-in: all checks passed');
