"""The tables of scripts/bench's replication section (scripts/bench_repl.py
measures; this prints). `B` is scripts/bench's module object, as there."""

from bench_repl import MODES, SYNC_FORMS, WAIT_BLOCKS, lag_requests


def _fmt_int(v):
    return f"{v:,.0f}"


def _fmt_us(v):
    return f"{v:,.0f}"


def _fmt_s(v):
    return f"{v:.2f}"


def print_repl(B, args, r, redis_version):
    """The section's tables, mode by mode (see bench_repl.print_repl)."""
    version = redis_version.split()[2] if len(redis_version.split()) > 2 else "redis"
    for mode in r["modes"]:
        if mode in r["tput"]:
            print_tput(B, args, r["tput"][mode], mode, version)
        if mode in r["wait"]:
            print_wait(B, args, r["wait"][mode], mode)
    if r["sync"] is not None:
        for mode in r["modes"]:
            print_sync(B, args, r["sync"][mode], mode)


def _replicas_line(mode, version):
    if mode == "pair":
        return ("hozon-server master → hozon-server replica against redis-server → "
                f"redis-server ({version}), both replicas `appendonly yes`, "
                "`appendfsync everysec`")
    return (f"the master is hozon-server or redis-server; the replica is redis-server "
            f"({version}, `appendonly no`) in both cases")


def print_tput(B, args, t, mode, version):
    print(f"### Replication (issue 25): write throughput, one replica ({MODES[mode]})")
    print()
    print(f"{_replicas_line(mode, version).capitalize()}. Master: "
          f"`appendonly yes`, `appendfsync everysec`. "
          f"Median of {args.repl_rounds} run(s) per server, alternated (order swapped every "
          f"other round); {args.clients} clients, -r {args.keyspace}, -n {args.requests} "
          f"(P=1) / {args.requests_pipelined} (P>1). After every run the replica's "
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
    print(f"### Replication (issue 25): lag under load ({MODES[mode]})")
    print()
    print(f"redis-benchmark SET at each pipeline, {args.clients} clients, "
          f"-n {lag_requests(args, 1):,} (P=1) / {lag_requests(args, 16):,} (P>1) (4× the "
          f"rows' -n), on the pairs above; a sampler thread reads the "
          f"master's `master_repl_offset` then the replica's `slave_repl_offset` (INFO "
          f"replication, one kept-open connection each) every ~10 ms during the run; lag = "
          f"the difference in bytes (the hozon master's offset counts what its last turn "
          f"published; Redis's also what the running turn appended and has not written "
          f"yet). Per run: p50, p99, max of the samples, and the p99 divided by the "
          f"run's mean stream rate (offset growth ÷ redis-benchmark's run time), the lag "
          f"in time at either pair's own rate, the replica's CPU over the run (user + "
          f"system, /proc/PID/stat) and the time its main thread was runnable but waiting "
          f"for a core (/proc/PID/schedstat); the table shows "
          f"the medians over {args.repl_rounds} run(s) per server.")
    print()
    print("| pipeline | measure | hozon | redis | hozon/redis |")
    print("|---------:|---------|------:|------:|------------:|")
    notes = []
    for pipe in args.pipelines:
        for key, label, fmt in (("p50", "lag p50 (bytes)", _fmt_int),
                                ("p99", "lag p99 (bytes)", _fmt_int),
                                ("max", "lag max (bytes)", _fmt_int),
                                ("p99_ms", "lag p99 ÷ mean stream rate (ms)", _fmt_s),
                                ("samples", "samples per run", _fmt_int),
                                ("rshare", "replica CPU, % of one core", _fmt_int),
                                ("rqueue", "replica waiting for a core, % of the run",
                                 _fmt_int),
                                ("ops", "SET ops/s meanwhile", _fmt_int)):
            errs = []
            c = B.summarize(lag[pipe], key, fmt, errs)
            if key == "p50":
                notes += [f"P={pipe} {name}: {e}" for name, e in errs]
            print(f"| {pipe} | {label} | {c['hozon']} | {c['redis']} | {c['ratio']} |")
    print()
    B.print_errors(notes)


def print_wait(B, args, w, mode):
    print(f"### Replication (issue 25): `WAIT 1 0` round trip, idle pair ({MODES[mode]})")
    print()
    print(f"One client (Python, one connection, TCP_NODELAY): `SET repl:wait <i>`, read the "
          f"reply, `WAIT 1 0`, read the reply (must be 1), {args.repl_wait_iterations:,} "
          f"times per run, in {WAIT_BLOCKS} blocks alternating hozon, redis block by block; "
          f"median over {args.repl_rounds} run(s) per server of each run's "
          f"percentiles (µs). The client's own cost is the same on both sides."
          + (" Pinned (--repl-wait-pin): masters and replicas on the last core, the "
             "client on the first." if args.repl_wait_pin else ""))
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


def print_sync(B, args, s, mode):
    print(f"### Replication (issue 25): full sync to a fresh replica ({MODES[mode]})")
    print()
    aof = (" AOF done: the replica's AOF complete (Redis: its AOF rewrite after the load "
           "finished; hozon writes the AOF before it swaps the data in)."
           if mode == "pair" else "")
    print(f"The snapshot section's deterministic mixed dataset ({args.repl_sync_keys:,} keys) "
          f"on each master (`appendonly no`, `save ''`); {MODES[mode]}, replicas "
          f"{'`appendonly yes`' if mode == 'pair' else '`appendonly no`'} (`--replicaof`, "
          f"empty dir, `repl-diskless-load disabled`). Times in seconds from spawning the "
          f"replica: serving = the first `GET` of a known key answering the master's value "
          f"(polled every ~5 ms); link up = `master_link_status:up` with the master's "
          f"DBSIZE.{aof} Afterwards ~600 sample keys must read the same on master and "
          f"replica. Disk: `repl-diskless-sync no`; diskless: `yes`, delay 0. CPU includes "
          f"reaped children (Redis's forks). The `log:` rows time the replica's own log "
          f"lines (ms stamps): connected → `sync: receiving`, → `Loading DB in memory`, → "
          f"`Finished with success`, → `Background AOF rewrite finished` (Redis); "
          f"hozon's AOF write is timed from the first sight of its `temp-sync-aof-*` file "
          f"(polled with the GET, ~5 ms) to serving. "
          f"Median of {args.repl_sync_rounds} sync(s) per "
          f"server and form, alternated.")
    print()
    print("| form | measure | hozon | redis | hozon/redis | spread h / r |")
    print("|------|---------|------:|------:|------------:|-------------:|")
    notes = []
    measures = [("secs", "serving s"), ("up", "link up s")]
    if mode == "pair":
        measures.append(("aof", "AOF done s"))
    measures += [("cpu", "master CPU s"), ("rcpu", "replica CPU s"),
                 ("ph_wait", "log: connected → payload starts s"),
                 ("ph_recv", "log: receiving the payload s"),
                 ("ph_load", "log: loading (hozon: + verify + AOF write) s")]
    if mode == "pair":
        measures.append(("ph_aofw", "hozon: of which writing its AOF s"))
    if mode == "pair":
        measures.append(("ph_aofrw", "log: AOF rewrite after the load s"))
    for form, _ in SYNC_FORMS:
        for key, label in measures:
            errs = []
            c = B.summarize(s[form], key, _fmt_s, errs)
            if key == "secs":
                notes += [f"{form} {name}: {e}" for name, e in errs]
            print(f"| {form} | {label} | {c['hozon']} | {c['redis']} | {c['ratio']} "
                  f"| {c['spread']} |")
    print()
    B.print_errors(notes)
