// ioredis's Lua script support (defineCommand: EVAL on a connection's
// first use, EVALSHA after, and back to EVAL when the server answers
// NOSCRIPT) against a server on 127.0.0.1.
//
// Run by tests/persistence/scripting.rs:   node scripts_client.js PORT
// Exits 0 when every check holds; otherwise prints what failed and exits 1.

"use strict";

const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const Redis = require("ioredis");
const Command = require("ioredis/built/Command").default;

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error("usage: node scripts_client.js PORT");
  process.exit(2);
}

// Every EVAL and EVALSHA ioredis writes to a socket, in order: proves which
// path (EVAL, EVALSHA, the NOSCRIPT fallback) a call took. Script commands
// are a subclass of Command, so patching the base prototype sees them.
const written = [];
const originalToWritable = Command.prototype.toWritable;
Command.prototype.toWritable = function (socket) {
  const wrapped = originalToWritable.call(this, socket);
  if (/^(eval|evalsha)$/i.test(this.name)) {
    written.push(this.name.toLowerCase());
  }
  return wrapped;
};

function takeWritten() {
  return written.splice(0, written.length);
}

function options(extra) {
  return {
    host: "127.0.0.1",
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
    ...extra,
  };
}

const INCR_TWO = `
local a = redis.call('INCRBY', KEYS[1], ARGV[1])
local b = redis.call('INCRBY', KEYS[2], ARGV[1])
return {a, b}
`;

const ECHO_ALL = `
local out = {}
for i, k in ipairs(KEYS) do out[#out + 1] = k end
for i, v in ipairs(ARGV) do out[#out + 1] = v end
return out
`;

const SHAPES = `return {1, 3.99, true, false, 'x', {ok='FINE'}, {2, {3}}}`;

const STORE_AND_GET = `
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
`;

function sha1(text) {
  return crypto.createHash("sha1").update(text).digest("hex");
}

async function expectReject(promise, message, what) {
  try {
    await promise;
  } catch (err) {
    assert.equal(err.message, message, what);
    return;
  }
  assert.fail(`${what}: expected the error ${JSON.stringify(message)}`);
}

async function evalshaFallsBackAfterScriptFlush(client, admin) {
  client.defineCommand("incrTwo", { numberOfKeys: 2, lua: INCR_TWO });
  takeWritten();
  // A socket's first call sends the script itself.
  assert.deepEqual(await client.incrTwo("a", "b", 1), [1, 1]);
  assert.deepEqual(takeWritten(), ["eval"], "first call on a socket");
  assert.deepEqual(await client.incrTwo("a", "b", 2), [3, 3]);
  assert.deepEqual(takeWritten(), ["evalsha"], "later calls use the SHA");
  assert.deepEqual(await admin.script("EXISTS", sha1(INCR_TWO)), [1]);

  let expected = 3;
  for (let round = 0; round < 20; round++) {
    // Flushed from another connection: this socket still believes the
    // script is loaded, sends EVALSHA, gets NOSCRIPT and resends EVAL.
    assert.equal(await admin.script("FLUSH"), "OK");
    assert.deepEqual(await admin.script("EXISTS", sha1(INCR_TWO)), [0]);
    expected += round;
    assert.deepEqual(await client.incrTwo("a", "b", round), [expected, expected]);
    assert.deepEqual(takeWritten(), ["evalsha", "eval"], `fallback in round ${round}`);
    // EVAL cached the script again.
    assert.deepEqual(await admin.script("EXISTS", sha1(INCR_TWO)), [1]);
    expected += 1;
    assert.deepEqual(await client.incrTwo("a", "b", 1), [expected, expected]);
    assert.deepEqual(takeWritten(), ["evalsha"], `cached again in round ${round}`);
  }
  assert.equal(await admin.get("a"), String(expected));
  assert.equal(await admin.get("b"), String(expected));
}

async function pipelinesAndTransactionsFallBackToo(client, admin) {
  await admin.script("FLUSH");
  takeWritten();
  const results = await client
    .pipeline()
    .incrTwo("p", "q", 5)
    .incrTwo("p", "q", 5)
    .exec();
  // Each NOSCRIPT is retried as EVAL outside the pipeline, in order.
  assert.deepEqual(
    results,
    [
      [null, [5, 5]],
      [null, [10, 10]],
    ],
    "pipelined script calls after SCRIPT FLUSH",
  );
  assert.equal(await admin.get("p"), "10");
  // Both queued EVALSHAs get NOSCRIPT; the first retry sends the body
  // (EVAL caches it), the second retry finds it by SHA.
  assert.deepEqual(takeWritten(), ["evalsha", "evalsha", "eval", "evalsha"], "pipeline fallback");

  // A script loaded on this socket, queued inside MULTI.
  const multi = await client.multi().incrTwo("p", "q", 1).incrTwo("p", "q", 1).exec();
  assert.deepEqual(
    multi,
    [
      [null, [11, 11]],
      [null, [12, 12]],
    ],
    "script calls inside MULTI",
  );

  // Flushed under a transaction: the queued EVALSHA fails inside EXEC
  // with NOSCRIPT (nothing can be retried there); the rest of the
  // transaction runs, and the next plain call falls back to EVAL.
  await admin.script("FLUSH");
  const flushed = await client.multi().incrTwo("p", "q", 1).get("p").exec();
  assert.equal(flushed.length, 2);
  assert.ok(flushed[0][0] instanceof Error, "the script call inside EXEC failed");
  assert.equal(flushed[0][0].message, "NOSCRIPT No matching script. Please use EVAL.");
  assert.deepEqual(flushed[1], [null, "12"], "the rest of the transaction ran");
  takeWritten();
  assert.deepEqual(await client.incrTwo("p", "q", 1), [13, 13]);
  assert.deepEqual(takeWritten(), ["evalsha", "eval"], "fallback after the failed EXEC");
}

async function scriptCommandsAndReplyShapes(client, admin) {
  const sha = await admin.script("LOAD", ECHO_ALL);
  assert.equal(sha, sha1(ECHO_ALL), "SCRIPT LOAD returns the SHA1 of the body");
  assert.deepEqual(await admin.evalsha(sha, 2, "k1", "k2", "v1"), ["k1", "k2", "v1"]);
  await expectReject(
    admin.evalsha("f".repeat(40), 0),
    "NOSCRIPT No matching script. Please use EVAL.",
    "EVALSHA of an unknown SHA",
  );

  // No numberOfKeys: the first argument of each call is the key count.
  client.defineCommand("echoAll", { lua: ECHO_ALL });
  assert.deepEqual(await client.echoAll(1, "k", "x", "y"), ["k", "x", "y"]);
  assert.deepEqual(await client.echoAll(0, "x"), ["x"]);

  assert.deepEqual(
    await admin.eval(SHAPES, 0),
    [1, 3, 1, null, "x", "FINE", [2, [3]]],
    "Lua values converted to RESP",
  );
  await expectReject(admin.eval("return {err='MYERR boom'}", 0), "MYERR boom", "err table");
  await expectReject(
    admin.eval("return redis.error_reply('MYERR two')", 0),
    "MYERR two",
    "redis.error_reply",
  );
  await admin.del("wrong");
  await admin.rpush("wrong", "x");
  const incrSha = sha1("return redis.call('INCR', KEYS[1])");
  await expectReject(
    admin.eval("return redis.call('INCR', KEYS[1])", 1, "wrong"),
    "WRONGTYPE Operation against a key holding the wrong kind of value " +
      `script: ${incrSha}, on @user_script:1.`,
    "an error raised by redis.call",
  );
  await expectReject(
    admin.eval("return redis.pcall('INCR', KEYS[1])", 1, "wrong"),
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "an error returned by redis.pcall",
  );
  const roSha = sha1("return redis.call('SET', KEYS[1], 1)");
  await expectReject(
    admin.call("EVAL_RO", "return redis.call('SET', KEYS[1], 1)", 1, "ro"),
    "ERR Write commands are not allowed from read-only scripts. " +
      `script: ${roSha}, on @user_script:1.`,
    "a write from EVAL_RO",
  );
  await admin.set("ro", "value");
  assert.equal(await admin.call("EVAL_RO", "return redis.call('GET', KEYS[1])", 1, "ro"), "value");

  // Binary-safe arguments and replies through the Buffer variant.
  client.defineCommand("storeAndGet", { numberOfKeys: 1, lua: STORE_AND_GET });
  const bytes = Buffer.from([0, 255, 13, 10, 128, 36, 42, 0]);
  const back = await client.storeAndGetBuffer("bin", bytes);
  assert.ok(Buffer.isBuffer(back) && back.equals(bytes), "binary value round trip");
  assert.ok((await admin.getBuffer("bin")).equals(bytes), "binary value stored");
}

async function keyPrefixAppliesToScriptKeys(admin) {
  const prefixed = new Redis(options({ keyPrefix: "pfx:" }));
  try {
    await prefixed.connect();
    prefixed.defineCommand("incrTwo", { numberOfKeys: 2, lua: INCR_TWO });
    assert.deepEqual(await prefixed.incrTwo("x", "y", 7), [7, 7]);
    assert.equal(await admin.get("pfx:x"), "7");
    assert.equal(await admin.get("pfx:y"), "7");
    assert.equal(await admin.exists("x"), 0);
  } finally {
    prefixed.disconnect();
  }
}

async function main() {
  const client = new Redis(options({}));
  const admin = new Redis(options({}));
  try {
    await client.connect();
    await admin.connect();
    await admin.flushall();
    const steps = [
      ["evalshaFallsBackAfterScriptFlush", () => evalshaFallsBackAfterScriptFlush(client, admin)],
      ["pipelinesAndTransactionsFallBackToo", () => pipelinesAndTransactionsFallBackToo(client, admin)],
      ["scriptCommandsAndReplyShapes", () => scriptCommandsAndReplyShapes(client, admin)],
      ["keyPrefixAppliesToScriptKeys", () => keyPrefixAppliesToScriptKeys(admin)],
    ];
    for (const [name, step] of steps) {
      await step();
      console.log(`ok ${name}`);
    }
    console.log(JSON.stringify({ checks: steps.length }));
  } finally {
    client.disconnect();
    admin.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.log(`FAILED: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
