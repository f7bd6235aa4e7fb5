"""The replication section of scripts/bench (issue 25): `--only-repl`, or
`--with-repl` after the other sections (a full run leaves it out).

Two modes (--repl-modes, both by default):

- `mixed`: each master (hozon-server, redis-server) with a redis-server
  replica (`appendonly no`): the figures compare the two masters feeding
  the same kind of replica.
- `pair`: hozon -> hozon against redis -> redis, both replicas on the
  durable setting hozon defaults to (`appendonly yes`, `appendfsync
  everysec`): the figures compare the two replication pairs.

1. Write throughput with one replica attached: redis-benchmark SET, INCR,
   LPUSH at each pipeline against a master with `appendonly yes`,
   `appendfsync everysec`; after each run the replica must catch up
   (its `slave_repl_offset` equal to the master's `master_repl_offset`,
   and equal DBSIZE) or the run is an error. ops/s and the master's CPU
   per request (/proc/PID/stat, all threads).
2. Replication lag under load: during a redis-benchmark SET run at each
   pipeline a sampler thread reads `master_repl_offset` (master) then
   `slave_repl_offset` (replica) every ~10 ms; lag = the difference in
   bytes; p50/p99/max per run. At P=1 both masters take writes at about
   the same rate (the client's limit); pipelined, a faster master can
   outrun the single-threaded replica, and the lag then grows through
   the run.
3. WAIT round trip on an idle pair: one client doing SET then WAIT 1 0,
   one at a time, alternating hozon and redis in blocks of a tenth of
   the run; each WAIT must answer 1.
4. Full sync of the script's deterministic mixed dataset (the snapshot
   section's) to a fresh replica, disk-based (`repl-diskless-sync no`) and
   diskless (`yes`, delay 0). Times from the replica's spawn (which starts
   the sync at once): "serving" = the first `GET` of a known key (the last
   string key of the content sample) answering the master's value, polled
   every ~5 ms on one connection (before that: nil, or -LOADING); "link
   up" = `master_link_status:up` with the master's DBSIZE; in `pair` mode
   also "AOF done" = the replica's AOF is complete: Redis rewrites its AOF
   from the loaded data in a fork after the load (`aof_rewrite_in_progress`
   and `aof_rewrite_scheduled` back to 0), hozon writes a complete AOF of
   the payload before it swaps the data in (so it is done when serving).
   A sample of keys must read the same on both sides afterwards.

Runs alternate hozon, redis within each round, the order swapped every
other round; tables show medians. The helpers (Server, Conn, run_benchmark,
cpu_secs, summarize, ...) are scripts/bench's, reached through the module object
given to `repl_bench`/`print_repl` (scripts/bench is not importable by
name: it has no .py suffix).
"""

import os
import re
import shutil
import tempfile
import threading
import time

NAMES = ("hozon", "redis")
REPL_TESTS = ["set", "incr", "lpush"]
# The master's flags in parts 1-3. `repl-diskless-sync-delay 0`: the
# replicas of parts 1-3 attach to an empty master; no reason to wait 5 s.
MASTER_FLAGS = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--repl-diskless-sync-delay", "0"]
# Part 4: no AOF, no snapshots: only the sync itself writes.
SYNC_MASTER_FLAGS = ["--appendonly", "no", "--save", ""]
REPLICA_FLAGS = ["--appendonly", "no", "--save", ""]
# `pair` mode: both replicas on hozon's durable default.
PAIR_REPLICA_FLAGS = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
SYNC_FORMS = [("disk", "no"), ("diskless", "yes")]
# The two modes (see the module's docstring): the title of their tables.
MODES = {"mixed": "master → redis-server replica",
         "pair": "hozon → hozon vs redis → redis"}


def replica_of(binaries, mode, name):
    """(binary, flags) of the replica of `name`'s master in `mode`."""
    if mode == "pair":
        return binaries[name], PAIR_REPLICA_FLAGS
    return binaries["redis"], REPLICA_FLAGS


def order(rnd):
    """The servers' order in round `rnd` (1-based): swapped every other round."""
    return NAMES if rnd % 2 else NAMES[::-1]


def info(B, port, section="replication"):
    return B.info_fields(port, section)


def int_reply(B, port, *cmd):
    r = B.command(port, *cmd)
    if not isinstance(r, int):
        raise B.WorkloadError(f"{' '.join(cmd)} answered {r!r}")
    return r


def new_replica(B, rs, master, workroot):
    """A replica of `master` (not started; `rs` is (binary, flags)) in a
    directory of its own: a Redis replica keeps the payload it loaded as
    dump.rdb, and one started on it would load it and continue instead of
    syncing in full."""
    binary, flags = rs
    return B.Server(f"replica-of-{master.name}", binary,
                    flags + ["--replicaof", "127.0.0.1", str(master.port)],
                    workroot, wdir=tempfile.mkdtemp(prefix="replica-", dir=workroot))


def start_replica(B, rs, master, workroot, wait_up=True, timeout=120.0):
    """A started replica of `master` (`rs`: (binary, flags)). Returns the
    Server."""
    rep = new_replica(B, rs, master, workroot)
    rep.start()
    if wait_up:
        deadline = time.monotonic() + timeout
        while info(B, rep.port).get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise B.WorkloadError(f"replica of {master.name} not up after {timeout}s")
            time.sleep(0.05)
    return rep


def caught_up(B, master, replica, timeout):
    """Waits until the replica's applied offset equals the master's, then
    compares DBSIZE. Returns the seconds it took; raises WorkloadError."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        m = int(info(B, master.port)["master_repl_offset"])
        ri = info(B, replica.port)
        r = int(ri.get("slave_repl_offset", -1))
        if r == m and ri.get("master_link_status") == "up":
            secs = time.monotonic() - t0
            break
        if time.monotonic() > deadline:
            raise B.WorkloadError(f"replica not caught up after {timeout}s: master offset "
                                  f"{m}, replica {r}, link {ri.get('master_link_status')}")
        time.sleep(0.01)
    dm, dr = int_reply(B, master.port, "DBSIZE"), int_reply(B, replica.port, "DBSIZE")
    if dm != dr:
        raise B.WorkloadError(f"DBSIZE master {dm} != replica {dr} at equal offsets")
    return secs


def ensure_alive(B, pairs, r, reps, workroot):
    """Restarts a pair whose master or replica exited (the row gets an error);
    `reps[name]` is the replica's (binary, flags)."""
    for name, (m, rep) in list(pairs.items()):
        if not (m.alive() and rep.alive()):
            r["errors"].setdefault(name, f"{m.name} or its replica had exited "
                                         f"({m.log_tail(3)}); restarted")
            rep.stop()
            m.stop()
            m.start()
            pairs[name] = (m, start_replica(B, reps[name], m, workroot))


# ------------------------------------------------------------ parts 1-2 --


def _sampler(B, mport, rport, stop, out):
    """Lag samples (bytes) until `stop` is set: master offset, then replica
    offset, every ~10 ms, on two kept-open connections."""
    mc, rc = B.Conn(mport), B.Conn(rport)
    try:
        while not stop.is_set():
            m = int(B.info_fields(mc, "replication")["master_repl_offset"])
            r = int(B.info_fields(rc, "replication").get("slave_repl_offset", -1))
            out.append(max(0, m - r))
            stop.wait(0.01)
    except Exception as e:  # noqa: BLE001 - reported as the run's error
        out.append(e)
    finally:
        mc.close()
        rc.close()


def runqueue_secs(pid):
    """Seconds the main thread of `pid` has spent runnable but waiting for
    a core (/proc/PID/schedstat's second field), or None."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def lag_requests(args, pipe):
    """A lag run is 4x the row's -n: a few seconds, a few hundred samples."""
    n = 4 * (args.requests if pipe == 1 else args.requests_pipelined)
    return -(-n // pipe) * pipe


def lag_run(B, args, rb, master, replica, n, pipe):
    samples = []
    stop = threading.Event()
    t = threading.Thread(target=_sampler, args=(B, master.port, replica.port, stop, samples),
                         daemon=True)
    off0 = int(info(B, master.port)["master_repl_offset"])
    rcpu0 = B.cpu_secs(replica.pid())
    rq0 = runqueue_secs(replica.pid())
    t.start()
    try:
        rps, err, secs = B.run_benchmark(rb, master.port, "set", n, args.clients, pipe,
                                         args.keyspace, args.timeout)
    finally:
        stop.set()
        t.join(30)
    # The stream's mean rate over the run (bytes/s): lag in bytes over it
    # is how far behind the replica was in time, at either server's rate.
    rate = (int(info(B, master.port)["master_repl_offset"]) - off0) / max(secs, 1e-3)
    rcpu1 = B.cpu_secs(replica.pid())
    rq1 = runqueue_secs(replica.pid())
    if err:
        raise B.WorkloadError(err)
    bad = [s for s in samples if isinstance(s, Exception)]
    if bad:
        raise B.WorkloadError(f"sampler: {type(bad[0]).__name__}: {bad[0]}")
    if len(samples) < 5:
        raise B.WorkloadError(f"only {len(samples)} lag samples")
    caught_up(B, master, replica, args.repl_catchup_timeout)
    s = sorted(samples)
    p99 = B.percentile(s, 99)
    return {"ops": rps, "p50": B.percentile(s, 50), "p99": p99,
            "max": s[-1], "samples": len(s), "p99_ms": p99 / rate * 1e3 if rate else None,
            "rshare": (B.cpu_us_per_op(rcpu0, rcpu1, 1) / 1e6 / secs * 100
                       if None not in (rcpu0, rcpu1) else None),
            "rqueue": (rq1 - rq0) / secs * 100 if None not in (rq0, rq1) else None}


def throughput_and_lag(B, args, rb, binaries, workroot, mode):
    reps = {name: replica_of(binaries, mode, name) for name in NAMES}
    pairs = {}
    for name in NAMES:
        m = B.Server(f"{name}-master", binaries[name], MASTER_FLAGS, workroot).start()
        pairs[name] = (m, start_replica(B, reps[name], m, workroot))
        B.log(f"== repl {mode}: {name} master on :{m.port} (pid {m.pid()}), replica on "
              f":{pairs[name][1].port} (pid {pairs[name][1].pid()})")
    rows = [(t, p) for p in args.pipelines for t in REPL_TESTS]
    res = {row: {"hozon": [], "redis": [], "errors": {}} for row in rows}
    lag = {pipe: {"hozon": [], "redis": [], "errors": {}} for pipe in args.pipelines}
    try:
        for rnd in range(1, args.repl_rounds + 1):
            for (test, pipe) in rows:
                r = res[(test, pipe)]
                ensure_alive(B, pairs, r, reps, workroot)
                for name in order(rnd):
                    m, rep = pairs[name]
                    n = args.requests if pipe == 1 else args.requests_pipelined
                    n = B.round_up(n, pipe)
                    cpu0 = B.cpu_secs(m.pid())
                    rps, err, secs = B.run_benchmark(rb, m.port, test, n, args.clients, pipe,
                                                     args.keyspace, args.timeout)
                    cpu1 = B.cpu_secs(m.pid())
                    catch = None
                    if err is None:
                        try:
                            catch = caught_up(B, m, rep, args.repl_catchup_timeout)
                        except Exception as e:  # noqa: BLE001
                            err = str(e)
                    label = (f"[repl {mode} round {rnd}/{args.repl_rounds}] {test.upper():6} "
                             f"P={pipe:<3} {name:5}")
                    if err is None and not (m.alive() and rep.alive()):
                        err = "master or replica exited during the run"
                    if err is not None:
                        r["errors"].setdefault(name, err)
                        B.log(f"{label} ERROR: {err}")
                        continue
                    cpu = B.cpu_us_per_op(cpu0, cpu1, n)
                    r[name].append({"ops": rps, "cpu": cpu, "catch": catch * 1e3})
                    B.log(f"{label} {rps:12,.0f} ops/s  cpu {cpu or 0:.2f} us/op  "
                          f"caught up {catch * 1e3:.0f} ms after ({secs:.2f} s, -n {n})")
            for pipe in args.pipelines:
                ensure_alive(B, pairs, lag[pipe], reps, workroot)
                for name in order(rnd):
                    m, rep = pairs[name]
                    label = (f"[repl {mode} round {rnd}/{args.repl_rounds}] LAG    "
                             f"P={pipe:<3} {name:5}")
                    try:
                        got = lag_run(B, args, rb, m, rep, lag_requests(args, pipe), pipe)
                    except Exception as e:  # noqa: BLE001
                        msg = str(e) if isinstance(e, B.WorkloadError) \
                            else f"{type(e).__name__}: {e}"
                        lag[pipe]["errors"].setdefault(name, msg)
                        B.log(f"{label} ERROR: {msg}")
                        continue
                    lag[pipe][name].append(got)
                    B.log(f"{label} lag p50 {got['p50']:,.0f} B  p99 {got['p99']:,.0f} B  "
                          f"max {got['max']:,} B  p99/rate {got['p99_ms'] or 0:.2f} ms  "
                          f"replica CPU {got['rshare'] or 0:.0f}%  "
                          f"runnable-waiting {got['rqueue'] or 0:.0f}%  "
                          f"({got['samples']} samples, "
                          f"{got['ops']:,.0f} ops/s)")
    finally:
        for m, rep in pairs.values():
            rep.stop()
            m.stop()
    return {"rows": rows, "res": res, "lag": lag}


# ---------------------------------------------------------------- part 3 --


WAIT_BLOCKS = 50


def wait_block(B, conn, first, count, acc):
    """`count` times SET then WAIT 1 0, one command at a time, on an open
    connection; appends the latencies (µs) and the block's time to `acc`."""
    pc = time.perf_counter
    t_start = pc()
    for i in range(first, first + count):
        t0 = pc()
        if conn.call("SET", "repl:wait", str(i)) != "OK":
            raise B.WorkloadError("SET did not answer +OK")
        t1 = pc()
        got = conn.call("WAIT", "1", "0")
        t2 = pc()
        if got != 1:
            raise B.WorkloadError(f"WAIT 1 0 answered {got!r} at iteration {i}")
        acc["whole"].append((t2 - t0) * 1e6)
        acc["waits"].append((t2 - t1) * 1e6)
    acc["total"] += pc() - t_start


def wait_metrics(B, acc):
    whole, waits = sorted(acc["whole"]), sorted(acc["waits"])
    return {"p50": B.percentile(whole, 50), "p99": B.percentile(whole, 99),
            "wait_p50": B.percentile(waits, 50), "wait_p99": B.percentile(waits, 99),
            "total": acc["total"]}


def pin(pid, cpus):
    """Every thread of process `pid` on `cpus` (a set of CPU numbers)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def wait_section(B, args, binaries, workroot, mode):
    """Each round runs --repl-wait-iterations pairs per server in
    WAIT_BLOCKS blocks, alternating hozon, redis block by block: on a
    shared machine both servers then see the same neighbours."""
    reps = {name: replica_of(binaries, mode, name) for name in NAMES}
    pairs = {}
    r = {"hozon": [], "redis": [], "errors": {}}
    for name in NAMES:
        m = B.Server(f"{name}-master", binaries[name], MASTER_FLAGS, workroot).start()
        pairs[name] = (m, start_replica(B, reps[name], m, workroot))
    per_block = max(1, args.repl_wait_iterations // WAIT_BLOCKS)
    # --repl-wait-pin: which core each process wakes on decides a round
    # trip's cost on a VM (a wake-up on another, halted core is an
    # interrupt through the hypervisor); pinned, it is the same for both
    # pairs: masters and replicas on the last core, this client on the first.
    own = os.sched_getaffinity(0)
    if args.repl_wait_pin:
        last = max(own)
        for m, rep in pairs.values():
            pin(m.pid(), {last})
            pin(rep.pid(), {last})
        os.sched_setaffinity(0, {min(own)})
    try:
        for rnd in range(1, args.repl_rounds + 1):
            ensure_alive(B, pairs, r, reps, workroot)
            acc = {name: {"whole": [], "waits": [], "total": 0.0} for name in NAMES}
            conns = {}
            failed = {}
            try:
                for name in NAMES:
                    conns[name] = B.Conn(pairs[name][0].port)
                for blk in range(WAIT_BLOCKS):
                    for name in order(rnd + blk):
                        if name in failed:
                            continue
                        try:
                            wait_block(B, conns[name], blk * per_block, per_block, acc[name])
                        except Exception as e:  # noqa: BLE001
                            failed[name] = str(e) if isinstance(e, B.WorkloadError) \
                                else f"{type(e).__name__}: {e}"
            finally:
                for c in conns.values():
                    c.close()
            for name in NAMES:
                m, rep = pairs[name]
                label = f"[repl {mode} round {rnd}/{args.repl_rounds}] WAIT   {name:5}"
                if name not in failed:
                    try:
                        caught_up(B, m, rep, args.repl_catchup_timeout)
                    except Exception as e:  # noqa: BLE001
                        failed[name] = str(e)
                if name in failed:
                    r["errors"].setdefault(name, failed[name])
                    B.log(f"{label} ERROR: {failed[name]}")
                    continue
                got = wait_metrics(B, acc[name])
                r[name].append(got)
                B.log(f"{label} SET+WAIT p50 {got['p50']:.0f} us  p99 {got['p99']:.0f} us  "
                      f"(WAIT alone p50 {got['wait_p50']:.0f} us)  total {got['total']:.2f} s")
    finally:
        os.sched_setaffinity(0, own)
        for m, rep in pairs.values():
            rep.stop()
            m.stop()
    return r


# ---------------------------------------------------------------- part 4 --


def _probe(B, conn_box, port, key):
    """GET `key` on a kept connection (opened on first use, dropped on a
    connection error); None while the replica is not listening."""
    try:
        if conn_box[0] is None:
            conn_box[0] = B.Conn(port, timeout=10)
        c = conn_box[0]
        c.send(B.resp_command("GET", key))
        return c.read()
    except (OSError, ConnectionError, ValueError):
        if conn_box[0] is not None:
            conn_box[0].close()
            conn_box[0] = None
        return None


def watch_files(wdir, times, t0, stop):
    """A thread's loop: notes in `times` when a hozon replica's temporary
    AOF of the payload (`temp-sync-aof-*`, written after the payload is
    verified and loaded, renamed into place before the data is swapped in)
    is first seen: `aofw`, seconds since t0; polled every ~5 ms (in a
    thread: the replica may not answer the probe meanwhile)."""
    while not stop.is_set() and "aofw" not in times:
        try:
            if any(n.startswith("temp-sync-aof-") for n in os.listdir(wdir)):
                times["aofw"] = time.monotonic() - t0
        except OSError:
            pass
        stop.wait(0.005)


def timed_sync(B, rs, master, workroot, nkeys, probe, timeout, aof):
    """Spawns a fresh replica of `master` (`rs`: (binary, flags)) and times
    it from the spawn: `serve` when `GET probe[0]` first answers the
    master's value probe[1] (polled every ~5 ms), `up` when its link is up
    with the master's DBSIZE, and with `aof` also `aof` when its AOF is
    complete (no AOF rewrite in progress or scheduled). Returns (times
    dict, master CPU seconds incl. waited children, replica CPU seconds
    incl. waited children, replica Server)."""
    rep = new_replica(B, rs, master, workroot)
    full0 = int(info(B, master.port, "stats").get("sync_full", -1))
    cpu0 = cpu_with_children(master.pid())
    key, want = probe
    box = [None]
    times = {}
    t0 = time.monotonic()
    rep.spawn()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_files, args=(rep.wdir, times, t0, stop),
                               daemon=True)
    watcher.start()
    try:
        deadline = t0 + timeout
        while "serve" not in times:
            if not rep.alive():
                raise B.WorkloadError(f"replica exited: {rep.log_tail(3)}")
            if _probe(B, box, rep.port, key) == want:
                times["serve"] = time.monotonic() - t0
                break
            if time.monotonic() > deadline:
                raise B.WorkloadError(f"replica not serving the data after {timeout}s")
            time.sleep(0.005)
        stop.set()
        watcher.join()
        if box[0] is not None:
            box[0].close()
        while "up" not in times or (aof and "aof" not in times):
            if not rep.alive():
                raise B.WorkloadError(f"replica exited: {rep.log_tail(3)}")
            try:
                if "up" not in times:
                    up = info(B, rep.port).get("master_link_status") == "up"
                    if up and B.command(rep.port, "DBSIZE") == nkeys:
                        times["up"] = time.monotonic() - t0
                if aof and "aof" not in times:
                    p = info(B, rep.port, "persistence")
                    if p.get("aof_enabled") != "1":
                        raise B.WorkloadError("the replica's AOF is not enabled")
                    if p.get("aof_rewrite_in_progress") == "0" \
                            and p.get("aof_rewrite_scheduled") == "0":
                        times["aof"] = time.monotonic() - t0
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise B.WorkloadError(f"replica not in sync after {timeout}s")
            time.sleep(0.01)
        # A fork child (Redis's BGSAVE for the sync) is counted once reaped.
        time.sleep(0.2)
        cpu1 = cpu_with_children(master.pid())
        rcpu = cpu_with_children(rep.pid())
        full1 = int(info(B, master.port, "stats").get("sync_full", -1))
        if full1 != full0 + 1:
            raise B.WorkloadError(f"the master's sync_full went from {full0} to {full1}, "
                                  f"not up by one: not a full sync")
    except BaseException:
        stop.set()
        drop_replica(rep)
        raise
    return times, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None), rcpu, rep


# The replica's log lines (Redis's, which hozon writes too) that mark the
# phases of a sync; `phases` times them.
PHASE_LINES = (("connect", "Connecting to MASTER"),
               ("receive", "MASTER <-> REPLICA sync: receiving"),
               ("load", "MASTER <-> REPLICA sync: Loading DB in memory"),
               ("done", "MASTER <-> REPLICA sync: Finished with success"),
               ("aof", "Background AOF rewrite finished successfully"))


def phases(logpath):
    """Seconds per sync phase from the replica's log (millisecond stamps):
    `wait` (connected → the payload starts: the master's capture), `recv`
    (→ the payload is on disk), `load` (→ the data is swapped in; hozon's
    includes verifying it and writing its AOF), `aofrw` (Redis: → its AOF
    rewrite after the load finished). Missing lines leave a phase out."""
    at = {}
    try:
        with open(logpath, "rb") as f:
            for raw in f:
                line = raw.decode(errors="replace")
                for name, text in PHASE_LINES:
                    if name not in at and text in line:
                        m = re.search(r"(\d\d):(\d\d):(\d\d)\.(\d{3}) ", line)
                        if m:
                            h, mi, se, ms = (int(x) for x in m.groups())
                            at[name] = h * 3600 + mi * 60 + se + ms / 1000
    except OSError:
        return {}
    out = {}
    for key, a, b in (("wait", "connect", "receive"), ("recv", "receive", "load"),
                      ("load", "load", "done"), ("aofrw", "done", "aof")):
        if a in at and b in at:
            out[key] = (at[b] - at[a]) % 86400
    return out


def drop_replica(rep):
    rep.stop()
    shutil.rmtree(rep.wdir, ignore_errors=True)


def cpu_with_children(pid):
    """utime + stime + cutime + cstime of pid, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def full_sync(B, args, binaries, workroot, modes):
    """Part 4 for every mode, on the same two masters (the dataset is
    loaded once). Returns {mode: {form: row}}."""
    nkeys = args.repl_sync_keys
    B.log(f"repl full sync: generating the mixed dataset ({nkeys:,} keys)...")
    chunks, _stats, samples = B.snapshot_dataset(nkeys)
    masters = {}
    out = {mode: {form: {"hozon": [], "redis": [], "errors": {}} for form, _ in SYNC_FORMS}
           for mode in modes}
    probe_key = [k for k, kind in samples if kind == "string"][-1]
    try:
        for name in NAMES:
            m = B.Server(f"{name}-syncmaster", binaries[name], SYNC_MASTER_FLAGS,
                         workroot).start()
            masters[name] = m
            secs, errors, first = B.send_chunks(m.port, chunks)
            if errors:
                raise B.WorkloadError(f"{name}: loading the dataset: {errors} errors, "
                                      f"first {first}")
            got = int_reply(B, m.port, "DBSIZE")
            if got != nkeys:
                raise B.WorkloadError(f"{name}: DBSIZE {got} after loading {nkeys} keys")
            B.log(f"repl full sync: {name} loaded {nkeys:,} keys in {secs:.1f} s")
        probes = {}
        for name, m in masters.items():
            want = B.command(m.port, "GET", probe_key)
            if not isinstance(want, bytes):
                raise B.WorkloadError(f"{name}: GET {probe_key!r} answered {want!r}")
            probes[name] = (probe_key, want)
        if probes["hozon"][1] != probes["redis"][1]:
            raise B.WorkloadError(f"the masters differ on {probe_key!r}")
        for rnd in range(1, args.repl_sync_rounds + 1):
            for mode in modes:
                for form, flag in SYNC_FORMS:
                    for name in order(rnd):
                        sync_once(B, args, binaries, workroot, masters[name], name, mode,
                                  form, flag, rnd, nkeys, probes[name], samples,
                                  out[mode][form])
    finally:
        for m in masters.values():
            m.stop()
    return out


def sync_once(B, args, binaries, workroot, m, name, mode, form, flag, rnd, nkeys, probe,
              samples, row):
    """One timed full sync of a fresh replica of `m`, recorded in `row`."""
    label = f"[repl {mode} round {rnd}/{args.repl_sync_rounds}] SYNC {form:8} {name:5}"
    rep = None
    try:
        for k, v in (("repl-diskless-sync", flag), ("repl-diskless-sync-delay", "0")):
            if B.command(m.port, "CONFIG", "SET", k, v) != "OK":
                raise B.WorkloadError(f"CONFIG SET {k} {v} refused")
        times, cpu, rcpu, rep = timed_sync(B, replica_of(binaries, mode, name), m, workroot,
                                           nkeys, probe, args.repl_sync_timeout,
                                           aof=mode == "pair")
        diff = [(a, b) for a, b in zip(B.snapshot_sample(m.port, samples),
                                       B.snapshot_sample(rep.port, samples)) if a != b]
        if diff:
            raise B.WorkloadError(f"{len(diff)} of {len(samples)} sampled keys differ on "
                                  f"the replica; first {diff[0][0][0].decode()}")
        if not m.alive():
            raise B.WorkloadError("master exited")
        ph = phases(rep.logpath)
    except Exception as e:  # noqa: BLE001
        msg = str(e) if isinstance(e, B.WorkloadError) else f"{type(e).__name__}: {e}"
        row["errors"].setdefault(name, msg)
        B.log(f"{label} ERROR: {msg}")
        if not m.alive():
            raise
        return
    finally:
        if rep is not None:
            drop_replica(rep)
    if "aofw" in times:
        # hozon: from the temporary AOF's first sight to serving.
        ph["aofw"] = times["serve"] - times["aofw"]
    got = {"secs": times["serve"], "up": times["up"], "aof": times.get("aof"), "cpu": cpu,
           "rcpu": rcpu, **{f"ph_{k}": v for k, v in ph.items()}}
    row[name].append(got)
    aof = f", AOF done {got['aof']:.2f} s" if got["aof"] is not None else ""
    steps = ", ".join(f"{k} {v:.2f}" for k, v in ph.items())
    B.log(f"{label} serving {got['secs']:.2f} s, link up {got['up']:.2f} s{aof} "
          f"(master CPU {cpu or 0:.2f} s, replica CPU {rcpu or 0:.2f} s; replica log: "
          f"{steps})")


# ---------------------------------------------------------------- driver --


def repl_bench(B, args, rb, binaries, workroot):
    """Every part in every mode of `args.repl_modes` (parts in
    `args.repl_parts`). Returns {"modes", "tput": {mode}, "wait": {mode},
    "sync": {mode: {form}}}."""
    modes = args.repl_modes
    parts = args.repl_parts
    r = {"modes": modes, "tput": {}, "wait": {}, "sync": None}
    for mode in modes:
        if "tput" in parts:
            r["tput"][mode] = throughput_and_lag(B, args, rb, binaries, workroot, mode)
        if "wait" in parts:
            r["wait"][mode] = wait_section(B, args, binaries, workroot, mode)
    if "sync" in parts:
        try:
            r["sync"] = full_sync(B, args, binaries, workroot, modes)
        except Exception as e:  # noqa: BLE001 - a setup failure: no figures
            msg = str(e) if isinstance(e, B.WorkloadError) else f"{type(e).__name__}: {e}"
            B.log(f"repl full sync: ERROR {msg}")
            r["sync"] = {mode: {form: {"hozon": [], "redis": [],
                                       "errors": {n: msg for n in NAMES}}
                                for form, _ in SYNC_FORMS} for mode in modes}
    return r


def print_repl(B, args, r, redis_version):
    """Prints the section's tables, mode by mode (scripts/bench_repl_report.py)."""
    import bench_repl_report
    bench_repl_report.print_repl(B, args, r, redis_version)
