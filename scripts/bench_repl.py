"""The replication section of scripts/bench (issue 25): `--only-repl`, or
`--with-repl` after the other sections (a full run leaves it out).

hozon implements the master side of replication only, so every measurement
pairs a master (hozon-server or redis-server) with a redis-server replica;
the figures compare the two masters feeding the same kind of replica.
hozon -> hozon waits for the replica side.

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
   section's) to a fresh replica: from the replica's spawn until its
   `master_link_status:up` and DBSIZE equal to the master's, disk-based
   (`repl-diskless-sync no`) and diskless (`yes`, delay 0); a sample of
   keys must read the same on both sides afterwards.

Runs alternate hozon, redis within each round, as elsewhere in the script;
tables show medians. The helpers (Server, Conn, run_benchmark, cpu_secs,
summarize, ...) are scripts/bench's, reached through the module object
given to `repl_bench`/`print_repl` (scripts/bench is not importable by
name: it has no .py suffix).
"""

import os
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
SYNC_FORMS = [("disk", "no"), ("diskless", "yes")]


def info(B, port, section="replication"):
    return B.info_fields(port, section)


def int_reply(B, port, *cmd):
    r = B.command(port, *cmd)
    if not isinstance(r, int):
        raise B.WorkloadError(f"{' '.join(cmd)} answered {r!r}")
    return r


def new_replica(B, rs, master, workroot):
    """A redis-server replica of `master` (not started) in a directory of its
    own: a Redis replica keeps the payload it loaded as dump.rdb, and one
    started on it would load it and continue instead of syncing in full."""
    return B.Server(f"replica-of-{master.name}", rs,
                    REPLICA_FLAGS + ["--replicaof", "127.0.0.1", str(master.port)],
                    workroot, wdir=tempfile.mkdtemp(prefix="replica-", dir=workroot))


def start_replica(B, rs, master, workroot, wait_up=True, timeout=120.0):
    """A started redis-server replica of `master`. Returns the Server."""
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


def ensure_alive(B, pairs, r, rs, workroot):
    """Restarts a pair whose master or replica exited (the row gets an error)."""
    for name, (m, rep) in list(pairs.items()):
        if not (m.alive() and rep.alive()):
            r["errors"].setdefault(name, f"{m.name} or its replica had exited "
                                         f"({m.log_tail(3)}); restarted")
            rep.stop()
            m.stop()
            m.start()
            pairs[name] = (m, start_replica(B, rs, m, workroot))


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


def lag_requests(args, pipe):
    """A lag run is 4x the row's -n: a few seconds, a few hundred samples."""
    n = 4 * (args.requests if pipe == 1 else args.requests_pipelined)
    return -(-n // pipe) * pipe


def lag_run(B, args, rb, master, replica, n, pipe):
    samples = []
    stop = threading.Event()
    t = threading.Thread(target=_sampler, args=(B, master.port, replica.port, stop, samples),
                         daemon=True)
    t.start()
    try:
        rps, err, _ = B.run_benchmark(rb, master.port, "set", n, args.clients, pipe,
                                      args.keyspace, args.timeout)
    finally:
        stop.set()
        t.join(30)
    if err:
        raise B.WorkloadError(err)
    bad = [s for s in samples if isinstance(s, Exception)]
    if bad:
        raise B.WorkloadError(f"sampler: {type(bad[0]).__name__}: {bad[0]}")
    if len(samples) < 5:
        raise B.WorkloadError(f"only {len(samples)} lag samples")
    caught_up(B, master, replica, args.repl_catchup_timeout)
    s = sorted(samples)
    return {"ops": rps, "p50": B.percentile(s, 50), "p99": B.percentile(s, 99),
            "max": s[-1], "samples": len(s)}


def throughput_and_lag(B, args, rb, binaries, workroot):
    rs = binaries["redis"]
    pairs = {}
    for name in NAMES:
        m = B.Server(f"{name}-master", binaries[name], MASTER_FLAGS, workroot).start()
        pairs[name] = (m, start_replica(B, rs, m, workroot))
        B.log(f"== repl: {name} master on :{m.port}, redis replica on :{pairs[name][1].port}")
    rows = [(t, p) for p in args.pipelines for t in REPL_TESTS]
    res = {row: {"hozon": [], "redis": [], "errors": {}} for row in rows}
    lag = {pipe: {"hozon": [], "redis": [], "errors": {}} for pipe in args.pipelines}
    try:
        for rnd in range(1, args.repl_rounds + 1):
            for (test, pipe) in rows:
                r = res[(test, pipe)]
                ensure_alive(B, pairs, r, rs, workroot)
                for name in NAMES:
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
                    label = (f"[repl round {rnd}/{args.repl_rounds}] {test.upper():6} "
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
                ensure_alive(B, pairs, lag[pipe], rs, workroot)
                for name in NAMES:
                    m, rep = pairs[name]
                    label = f"[repl round {rnd}/{args.repl_rounds}] LAG    P={pipe:<3} {name:5}"
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
                          f"max {got['max']:,} B  ({got['samples']} samples, "
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


def wait_section(B, args, binaries, workroot):
    """Each round runs --repl-wait-iterations pairs per server in
    WAIT_BLOCKS blocks, alternating hozon, redis block by block: on a
    shared machine both servers then see the same neighbours."""
    rs = binaries["redis"]
    pairs = {}
    r = {"hozon": [], "redis": [], "errors": {}}
    for name in NAMES:
        m = B.Server(f"{name}-master", binaries[name], MASTER_FLAGS, workroot).start()
        pairs[name] = (m, start_replica(B, rs, m, workroot))
    per_block = max(1, args.repl_wait_iterations // WAIT_BLOCKS)
    try:
        for rnd in range(1, args.repl_rounds + 1):
            ensure_alive(B, pairs, r, rs, workroot)
            acc = {name: {"whole": [], "waits": [], "total": 0.0} for name in NAMES}
            conns = {}
            failed = {}
            try:
                for name in NAMES:
                    conns[name] = B.Conn(pairs[name][0].port)
                for blk in range(WAIT_BLOCKS):
                    for name in NAMES:
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
                label = f"[repl round {rnd}/{args.repl_rounds}] WAIT   {name:5}"
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
        for m, rep in pairs.values():
            rep.stop()
            m.stop()
    return r


# ---------------------------------------------------------------- part 4 --


def timed_sync(B, rs, master, workroot, nkeys, timeout):
    """Spawns a fresh replica of `master` and times it until its link is up
    with the master's DBSIZE. Returns (seconds, master CPU seconds incl.
    waited children, replica Server)."""
    rep = new_replica(B, rs, master, workroot)
    full0 = int(info(B, master.port, "stats").get("sync_full", -1))
    cpu0 = cpu_with_children(master.pid())
    t0 = time.monotonic()
    rep.spawn()
    try:
        deadline = t0 + timeout
        while True:
            if not rep.alive():
                raise B.WorkloadError(f"replica exited: {rep.log_tail(3)}")
            try:
                up = info(B, rep.port).get("master_link_status") == "up"
                if up and B.command(rep.port, "DBSIZE") == nkeys:
                    break
            except (OSError, ConnectionError, B.WorkloadError):
                pass  # not listening yet, or -LOADING
            if time.monotonic() > deadline:
                raise B.WorkloadError(f"replica not in sync after {timeout}s")
            time.sleep(0.01)
        secs = time.monotonic() - t0
        # A fork child (Redis's BGSAVE for the sync) is counted once reaped.
        time.sleep(0.2)
        cpu1 = cpu_with_children(master.pid())
        full1 = int(info(B, master.port, "stats").get("sync_full", -1))
        if full1 != full0 + 1:
            raise B.WorkloadError(f"the master's sync_full went from {full0} to {full1}, "
                                  f"not up by one: not a full sync")
    except BaseException:
        drop_replica(rep)
        raise
    return secs, (cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None), rep


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


def full_sync(B, args, binaries, workroot):
    rs = binaries["redis"]
    nkeys = args.repl_sync_keys
    B.log(f"repl full sync: generating the mixed dataset ({nkeys:,} keys)...")
    chunks, _stats, samples = B.snapshot_dataset(nkeys)
    masters = {}
    out = {form: {"hozon": [], "redis": [], "errors": {}} for form, _ in SYNC_FORMS}
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
        for rnd in range(1, args.repl_sync_rounds + 1):
            for form, flag in SYNC_FORMS:
                for name in NAMES:
                    m = masters[name]
                    label = f"[repl round {rnd}/{args.repl_sync_rounds}] SYNC {form:8} {name:5}"
                    rep = None
                    try:
                        for k, v in (("repl-diskless-sync", flag),
                                     ("repl-diskless-sync-delay", "0")):
                            if B.command(m.port, "CONFIG", "SET", k, v) != "OK":
                                raise B.WorkloadError(f"CONFIG SET {k} {v} refused")
                        secs, cpu, rep = timed_sync(B, rs, m, workroot, nkeys,
                                                    args.repl_sync_timeout)
                        diff = [(a, b) for a, b in zip(B.snapshot_sample(m.port, samples),
                                                       B.snapshot_sample(rep.port, samples))
                                if a != b]
                        if diff:
                            raise B.WorkloadError(f"{len(diff)} of {len(samples)} sampled keys "
                                                  f"differ on the replica; first "
                                                  f"{diff[0][0][0].decode()}")
                        if not m.alive():
                            raise B.WorkloadError("master exited")
                    except Exception as e:  # noqa: BLE001
                        msg = str(e) if isinstance(e, B.WorkloadError) \
                            else f"{type(e).__name__}: {e}"
                        out[form]["errors"].setdefault(name, msg)
                        B.log(f"{label} ERROR: {msg}")
                        if not m.alive():
                            raise
                        continue
                    finally:
                        if rep is not None:
                            drop_replica(rep)
                    out[form][name].append({"secs": secs, "cpu": cpu})
                    B.log(f"{label} {secs:.2f} s to link up with {nkeys:,} keys "
                          f"(master CPU {cpu or 0:.2f} s)")
    finally:
        for m in masters.values():
            m.stop()
    return out


# ---------------------------------------------------------------- driver --


def repl_bench(B, args, rb, binaries, workroot):
    r = {}
    r["tput"] = throughput_and_lag(B, args, rb, binaries, workroot)
    r["wait"] = wait_section(B, args, binaries, workroot)
    try:
        r["sync"] = full_sync(B, args, binaries, workroot)
    except Exception as e:  # noqa: BLE001 - a setup failure: no figures
        msg = str(e) if isinstance(e, B.WorkloadError) else f"{type(e).__name__}: {e}"
        B.log(f"repl full sync: ERROR {msg}")
        r["sync"] = {form: {"hozon": [], "redis": [], "errors": {n: msg for n in NAMES}}
                     for form, _ in SYNC_FORMS}
    return r


def _fmt_int(v):
    return f"{v:,.0f}"


def _fmt_us(v):
    return f"{v:,.0f}"


def _fmt_s(v):
    return f"{v:.2f}"


def print_repl(B, args, r, redis_version):
    t = r["tput"]
    print(f"### Replication (issue 25): write throughput, one replica (master → redis-server "
          f"replica)")
    print()
    print(f"The master is hozon-server or redis-server; the replica is redis-server in both "
          f"cases ({redis_version.split()[2] if len(redis_version.split()) > 2 else 'redis'}; "
          f"hozon → hozon is for when hozon's replica side lands). Master: "
          f"`appendonly yes`, `appendfsync everysec`; replica: `appendonly no`. "
          f"Median of {args.repl_rounds} run(s) per server, alternated; {args.clients} "
          f"clients, -r {args.keyspace}, -n {args.requests} (P=1) / "
          f"{args.requests_pipelined} (P>1). After every run the replica's "
          f"`slave_repl_offset` must reach the master's `master_repl_offset` within "
          f"{args.repl_catchup_timeout:g} s with equal DBSIZE, else the row is an error. "
          f"CPU = master user+system time per request (/proc/PID/stat, all threads). "
          f"Catch-up = time from redis-benchmark's exit until the offsets were equal.")
    print()
    print("| test | pipeline | hozon ops/s | redis ops/s | hozon/redis | spread h / r "
          "| hozon CPU µs/req | redis CPU µs/req | CPU hozon/redis | catch-up ms h / r |")
    print("|------|---------:|------------:|------------:|------------:|-------------:"
          "|----------------:|----------------:|----------------:|------------------:|")
    notes = []
    for (test, pipe) in t["rows"]:
        errs = []
        row = t["res"][(test, pipe)]
        c = B.summarize(row, "ops", B.fmt_ops, errs)
        cc = B.summarize(row, "cpu", B.fmt_cpu, [])
        ca = B.summarize(row, "catch", lambda v: f"{v:,.0f}", [])
        notes += [f"{test.upper()} P={pipe} {name}: {e}" for name, e in errs]
        print(f"| {test.upper()} | {pipe} | {c['hozon']} | {c['redis']} | {c['ratio']} "
              f"| {c['spread']} | {cc['hozon']} | {cc['redis']} | {cc['ratio']} "
              f"| {ca['hozon']} / {ca['redis']} |")
    print()
    B.print_errors(notes)

    lag = t["lag"]
    print(f"### Replication (issue 25): lag under load")
    print()
    print(f"redis-benchmark SET at each pipeline, {args.clients} clients, "
          f"-n {lag_requests(args, 1):,} (P=1) / {lag_requests(args, 16):,} (P>1) (4× the "
          f"rows' -n), on the pairs above; a sampler thread reads the "
          f"master's `master_repl_offset` then the replica's `slave_repl_offset` (INFO "
          f"replication, one kept-open connection each) every ~10 ms during the run; lag = "
          f"the difference in bytes. Per run: p50, p99, max of the samples; the table shows "
          f"the medians over {args.repl_rounds} run(s) per server.")
    print()
    print("| pipeline | measure | hozon | redis | hozon/redis |")
    print("|---------:|---------|------:|------:|------------:|")
    notes = []
    for pipe in args.pipelines:
        for key, label, fmt in (("p50", "lag p50 (bytes)", _fmt_int),
                                ("p99", "lag p99 (bytes)", _fmt_int),
                                ("max", "lag max (bytes)", _fmt_int),
                                ("samples", "samples per run", _fmt_int),
                                ("ops", "SET ops/s meanwhile", _fmt_int)):
            errs = []
            c = B.summarize(lag[pipe], key, fmt, errs)
            if key == "p50":
                notes += [f"P={pipe} {name}: {e}" for name, e in errs]
            print(f"| {pipe} | {label} | {c['hozon']} | {c['redis']} | {c['ratio']} |")
    print()
    B.print_errors(notes)

    w = r["wait"]
    print(f"### Replication (issue 25): `WAIT 1 0` round trip, idle pair")
    print()
    print(f"One client (Python, one connection, TCP_NODELAY): `SET repl:wait <i>`, read the "
          f"reply, `WAIT 1 0`, read the reply (must be 1), {args.repl_wait_iterations:,} "
          f"times per run, in {WAIT_BLOCKS} blocks alternating hozon, redis block by block; "
          f"median over {args.repl_rounds} run(s) per server of each run's "
          f"percentiles (µs). The client's own cost is the same on both sides.")
    print()
    print("| measure | hozon | redis | hozon/redis |")
    print("|---------|------:|------:|------------:|")
    notes = []
    for key, label, fmt in (("p50", "SET + WAIT p50 (µs)", _fmt_us),
                            ("p99", "SET + WAIT p99 (µs)", _fmt_us),
                            ("wait_p50", "WAIT alone p50 (µs)", _fmt_us),
                            ("wait_p99", "WAIT alone p99 (µs)", _fmt_us),
                            ("total", f"total, {args.repl_wait_iterations:,} iterations (s)",
                             _fmt_s)):
        errs = []
        c = B.summarize(w, key, fmt, errs)
        if key == "p50":
            notes += [f"{name}: {e}" for name, e in errs]
        print(f"| {label} | {c['hozon']} | {c['redis']} | {c['ratio']} |")
    print()
    B.print_errors(notes)

    s = r["sync"]
    print(f"### Replication (issue 25): full sync to a fresh redis-server replica")
    print()
    print(f"The snapshot section's deterministic mixed dataset ({args.repl_sync_keys:,} keys) "
          f"on each master (`appendonly no`, `save ''`); time from spawning a fresh "
          f"redis-server replica (`--replicaof`, empty dir, default `repl-diskless-load "
          f"disabled`) until its `master_link_status:up` with the master's DBSIZE; "
          f"afterwards ~600 sample keys must read the same on master and replica. Disk: "
          f"`repl-diskless-sync no` (the master writes the payload to a file first); "
          f"diskless: `yes`, delay 0. Master CPU includes reaped children (Redis's fork). "
          f"Median of {args.repl_sync_rounds} sync(s) per server and form, alternated.")
    print()
    print("| form | hozon s | redis s | hozon/redis | spread h / r | hozon master CPU s "
          "| redis master CPU s | CPU hozon/redis |")
    print("|------|--------:|--------:|------------:|-------------:|-------------------:"
          "|-------------------:|----------------:|")
    notes = []
    for form, _ in SYNC_FORMS:
        errs = []
        c = B.summarize(s[form], "secs", _fmt_s, errs)
        cc = B.summarize(s[form], "cpu", _fmt_s, [])
        notes += [f"{form} {name}: {e}" for name, e in errs]
        print(f"| {form} | {c['hozon']} | {c['redis']} | {c['ratio']} | {c['spread']} "
              f"| {cc['hozon']} | {cc['redis']} | {cc['ratio']} |")
    print()
    B.print_errors(notes)

