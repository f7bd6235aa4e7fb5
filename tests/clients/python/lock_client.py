"""redis-py's distributed Lock (whose release, extend and reacquire are Lua
scripts run with EVALSHA) against a server on 127.0.0.1.

Run by tests/persistence/scripting.rs:

    lock_client.py PORT basic
    lock_client.py PORT contend PROCESSES SECONDS

Exits 0 when every check holds; otherwise prints what failed and exits 1.
The last line of stdout is a JSON summary.
"""

import json
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_raises(exc_type, fn, what):
    try:
        fn()
    except exc_type as exc:
        return exc
    raise AssertionError(f"{what}: expected {exc_type.__name__}, nothing raised")


def connect(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def pttl_between(r, key, low_ms, high_ms, what):
    ttl_ms = r.pttl(key)
    check(low_ms < ttl_ms <= high_ms, f"{what}: PTTL {ttl_ms} not in ({low_ms}, {high_ms}]")


def acquire_and_release(r):
    lock = r.lock("lk:basic", timeout=10)
    check(lock.acquire(blocking=False), "a free lock is acquired")
    check(lock.locked(), "locked() after acquire")
    check(lock.owned(), "owned() after acquire")
    check(r.get("lk:basic") == lock.local.token, "the key holds the owner's token")
    pttl_between(r, "lk:basic", 9000, 10000, "a fresh lock's TTL")
    lock.release()
    check(not lock.locked(), "not locked() after release")
    check(r.exists("lk:basic") == 0, "release deletes the key")
    expect_raises(LockError, lock.release, "releasing an unlocked lock")


def non_owner_is_refused(r):
    owner = r.lock("lk:owner", timeout=10)
    other = r.lock("lk:owner", timeout=10)
    check(owner.acquire(blocking=False), "owner acquires")
    check(not other.acquire(blocking=False), "a held lock is not acquired twice")
    other.local.token = b"not-the-owner"
    check(not other.owned(), "a non-owner does not own the lock")
    # The release, extend and reacquire scripts compare the token and
    # answer 0: redis-py turns that into LockNotOwnedError.
    expect_raises(LockNotOwnedError, other.release, "release by a non-owner")
    # release() forgets the token before asking the server: set it again.
    other.local.token = b"not-the-owner"
    expect_raises(LockNotOwnedError, lambda: other.extend(5), "extend by a non-owner")
    expect_raises(LockNotOwnedError, other.reacquire, "reacquire by a non-owner")
    check(owner.owned(), "the owner still owns the lock after a refused release")
    pttl_between(r, "lk:owner", 9000, 10000, "a refused extend leaves the TTL alone")
    owner.release()
    check(r.exists("lk:owner") == 0, "the owner's release deletes the key")


def blocking_acquire_with_timeout(r):
    # Not thread-local: a helper thread releases it.
    holder = r.lock("lk:block", timeout=10, thread_local=False)
    waiter = r.lock("lk:block", timeout=10, sleep=0.01)
    check(holder.acquire(blocking=False), "holder acquires")
    started = time.monotonic()
    check(not waiter.acquire(blocking_timeout=0.3), "a blocking acquire times out")
    waited = time.monotonic() - started
    check(0.25 <= waited < 5.0, f"the blocking acquire waited {waited:.3f} s, not ~0.3 s")
    check(not waiter.acquire(blocking=False), "a non-blocking acquire fails at once")

    releaser = threading.Timer(0.2, holder.release)
    releaser.start()
    started = time.monotonic()
    got = waiter.acquire(blocking_timeout=5)
    waited = time.monotonic() - started
    releaser.join()
    check(got, "a blocking acquire succeeds once the holder releases")
    check(0.15 <= waited < 5.0, f"acquired after {waited:.3f} s, expected ~0.2 s")
    check(waiter.owned(), "the waiter owns the lock")
    waiter.release()


def extend_and_reacquire(r):
    # Bounds leave over a second for a loaded machine between the calls.
    lock = r.lock("lk:extend", timeout=3)
    check(lock.acquire(blocking=False), "acquire for extend")
    check(lock.extend(2) is True, "extend adds to the TTL")
    pttl_between(r, "lk:extend", 3500, 5000, "TTL after extend(2)")
    check(lock.extend(10, replace_ttl=True) is True, "extend with replace_ttl")
    pttl_between(r, "lk:extend", 8500, 10000, "TTL after extend(10, replace_ttl=True)")
    check(lock.reacquire() is True, "reacquire resets the TTL")
    pttl_between(r, "lk:extend", 1500, 3000, "TTL after reacquire")
    lock.release()
    no_ttl = r.lock("lk:no-ttl")
    check(no_ttl.acquire(blocking=False), "a lock without timeout is acquired")
    check(r.pttl("lk:no-ttl") == -1, "a lock without timeout has no TTL")
    expect_raises(LockError, lambda: no_ttl.extend(1), "extend of a lock without timeout")
    no_ttl.release()


def expiry_by_ttl(r):
    first = r.lock("lk:expire", timeout=0.2)
    check(first.acquire(blocking=False), "acquire a short lock")
    time.sleep(0.35)
    check(not first.locked(), "the lock expired by its TTL")
    check(not first.owned(), "an expired lock is not owned")
    second = r.lock("lk:expire", timeout=5)
    check(second.acquire(blocking=False), "an expired lock is free for others")
    expect_raises(LockNotOwnedError, lambda: first.extend(1), "extend of an expired lock")
    expect_raises(LockNotOwnedError, first.reacquire, "reacquire of an expired lock")
    expect_raises(LockNotOwnedError, first.release, "release of an expired, re-taken lock")
    check(second.owned(), "the new holder keeps the lock")
    second.release()


def script_cache_fallback(r):
    # SCRIPT FLUSH between calls: redis-py's Script gets NOSCRIPT from
    # EVALSHA, sends SCRIPT LOAD and retries the EVALSHA.
    lock = r.lock("lk:flush", timeout=10)
    check(lock.acquire(blocking=False), "acquire before SCRIPT FLUSH")
    r.script_flush()
    check(r.script_exists(Lock.lua_extend.sha) == [False], "SCRIPT FLUSH forgets the scripts")
    check(lock.extend(1) is True, "extend after SCRIPT FLUSH")
    check(r.script_exists(Lock.lua_extend.sha) == [True], "the fallback loaded the script")
    r.script_flush("SYNC")
    lock.release()
    check(r.exists("lk:flush") == 0, "release after SCRIPT FLUSH deletes the key")
    check(r.script_exists(Lock.lua_release.sha) == [True], "the release script is loaded again")

    # In a pipeline redis-py checks SCRIPT EXISTS and loads what is missing
    # before sending the queued EVALSHAs.
    r.script_flush()
    r.set("lk:pipe", b"tok")
    pipe = r.pipeline(transaction=True)
    Lock.lua_release(keys=["lk:pipe"], args=[b"wrong"], client=pipe)
    Lock.lua_release(keys=["lk:pipe"], args=[b"tok"], client=pipe)
    Lock.lua_release(keys=["lk:pipe"], args=[b"tok"], client=pipe)
    replies = pipe.execute()
    check(replies == [0, 1, 0], f"pipelined release scripts replied {replies}")


def context_manager(r):
    with r.lock("lk:ctx", timeout=5, blocking_timeout=1) as lock:
        check(lock.owned(), "owned inside the with block")
        holder = r.lock("lk:ctx", timeout=5)
        check(not holder.acquire(blocking=False), "held inside the with block")
    check(r.exists("lk:ctx") == 0, "released at the end of the with block")


def basic(port):
    r = connect(port)
    r.flushdb()
    steps = [
        acquire_and_release,
        non_owner_is_refused,
        blocking_acquire_with_timeout,
        extend_and_reacquire,
        expiry_by_ttl,
        script_cache_fallback,
        context_manager,
    ]
    for step in steps:
        step(r)
        print(f"ok {step.__name__}", flush=True)
    print(json.dumps({"checks": len(steps)}))


def contender(port, seconds, held_path, results):
    """Loops acquire -> critical section -> release until `seconds` pass.

    Two detectors of overlap: a `holders` counter every holder INCRs (and
    must see 1) and DECRs before releasing, and a file every holder creates
    with O_EXCL. `counter` is incremented by a non-atomic GET + SET, so any
    overlap would also lose an increment.
    """
    r = connect(port)
    rng = random.Random(os.getpid())
    lock = r.lock("lk:contended", timeout=10, sleep=0.002, blocking_timeout=10)
    deadline = time.monotonic() + seconds
    sections = 0
    violations = []
    while time.monotonic() < deadline:
        if not lock.acquire():
            violations.append("acquire timed out after 10 s")
            break
        holders = r.incr("holders")
        if holders != 1:
            violations.append(f"{holders} holders at once")
        try:
            fd = os.open(held_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            owns_file = True
        except FileExistsError:
            violations.append("the O_EXCL file already existed")
            owns_file = False
        value = int(r.get("counter") or 0)
        time.sleep(rng.random() * 0.001)
        r.set("counter", value + 1)
        if owns_file:
            os.unlink(held_path)
        r.decr("holders")
        lock.release()
        sections += 1
        # Let the others in now and then: the releaser would otherwise
        # usually win the next round before the pollers wake up.
        time.sleep(rng.random() * 0.002)
    results.put((os.getpid(), sections, violations))


def contend(port, processes, seconds):
    r = connect(port)
    r.delete("holders", "counter", "lk:contended")
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        held_path = os.path.join(tmp, "held")
        workers = [
            ctx.Process(target=contender, args=(port, seconds, held_path, results))
            for _ in range(processes)
        ]
        for w in workers:
            w.start()
        outcomes = [results.get(timeout=seconds + 60) for _ in workers]
        for w in workers:
            w.join(timeout=30)
            check(w.exitcode == 0, f"a contender exited with {w.exitcode}")
    per_process = [sections for _, sections, _ in outcomes]
    violations = [v for _, _, vs in outcomes for v in vs]
    total = sum(per_process)
    counter = int(r.get("counter") or 0)
    summary = {
        "processes": processes,
        "seconds": seconds,
        "sections": total,
        "per_process": per_process,
        "counter": counter,
        "violations": violations[:10],
    }
    print(json.dumps(summary), flush=True)
    check(not violations, f"mutual exclusion violated: {violations[:10]}")
    check(counter == total, f"counter {counter} != {total} critical sections (lost updates)")
    check(r.get("holders") in (None, b"0"), f"holders left at {r.get('holders')}")
    check(r.exists("lk:contended") == 0, "the lock is free at the end")
    check(total >= processes, f"only {total} critical sections in {seconds} s")


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    port = int(argv[1])
    mode = argv[2]
    try:
        if mode == "basic":
            basic(port)
        elif mode == "contend":
            contend(port, int(argv[3]), float(argv[4]))
        else:
            print(f"unknown mode {mode}", file=sys.stderr)
            return 2
    except AssertionError as failure:
        print(f"FAILED: {failure}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
