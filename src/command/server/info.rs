//! INFO: the sections and their fields.

use std::sync::OnceLock;

use super::{now_us, REDIS_VERSION};
use crate::command::{CmdResult, Ctx};
use crate::config;
use crate::core::stats_calls::MetricKind;
use crate::reply::Reply;

/// The sections `INFO` (no argument) and `INFO default` report.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "module_list",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Redis's `bytesToHuman`.
fn bytes_to_human(n: u64) -> String {
    const K: f64 = 1024.0;
    let d = n as f64;
    if n < 1024 {
        format!("{n}B")
    } else if n < 1024 * 1024 {
        format!("{:.2}K", d / K)
    } else if n < 1024 * 1024 * 1024 {
        format!("{:.2}M", d / (K * K))
    } else if n < 1024u64.pow(4) {
        format!("{:.2}G", d / K.powi(3))
    } else if n < 1024u64.pow(5) {
        format!("{:.2}T", d / K.powi(4))
    } else if n < 1024u64.pow(6) {
        format!("{:.2}P", d / K.powi(5))
    } else {
        format!("{n}B")
    }
}

/// `run_id`: a random 40-hex-digit id fixed for the life of the process.
fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| crate::repl::ids::ReplId::random().to_string())
}

/// A `/proc` file's text ("" where there is no `/proc`).
fn proc_text(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A `Name:   123 kB` field of a `/proc` status-style file, in bytes.
fn proc_kb_field(text: &str, field: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resident set size of the process, from `/proc/self/status`.
fn process_rss() -> u64 {
    proc_kb_field(&proc_text("/proc/self/status"), "VmRSS:")
}

/// (system, user) CPU seconds of a `/proc/.../stat` file, formatted as
/// Redis prints `getrusage` times. The kernel reports clock ticks, which
/// are 1/100 s on Linux (`USER_HZ`).
fn cpu_times(path: &str) -> (String, String) {
    let text = proc_text(path);
    // The command name in field 2 may contain spaces: fields are counted
    // after its closing parenthesis.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; after the name, indexes 11, 12.
    let show = |t: u64| format!("{}.{:06}", t / 100, (t % 100) * 10_000);
    (show(ticks(12)), show(ticks(11)))
}

fn info_server(ctx: &Ctx, out: &mut String) {
    let now_us = now_us();
    let uptime_s = ((now_us / 1000 - ctx.core.start_ms) / 1000).max(0);
    let config = &ctx.core.config;
    let os_type = proc_text("/proc/sys/kernel/ostype");
    let os_release = proc_text("/proc/sys/kernel/osrelease");
    let os = if os_type.is_empty() {
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
    } else {
        format!(
            "{} {} {}",
            os_type.trim(),
            os_release.trim(),
            std::env::consts::ARCH
        )
    };
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let config_file = config
        .config_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let multiplexing = if cfg!(target_os = "linux") {
        "epoll"
    } else {
        "kqueue"
    };
    let lines = [
        format!("redis_version:{REDIS_VERSION}"),
        "redis_git_sha1:00000000".to_string(),
        "redis_git_dirty:0".to_string(),
        "redis_build_id:0".to_string(),
        "redis_mode:standalone".to_string(),
        format!("os:{os}"),
        format!("arch_bits:{}", usize::BITS),
        "monotonic_clock:POSIX clock_gettime".to_string(),
        format!("multiplexing_api:{multiplexing}"),
        "atomicvar_api:c11-builtin".to_string(),
        "gcc_version:0.0.0".to_string(),
        format!("process_id:{}", std::process::id()),
        format!(
            "process_supervised:{}",
            match config.ops.supervised {
                crate::config::ops::Supervised::Upstart => "upstart",
                crate::config::ops::Supervised::Systemd => "systemd",
                _ => "no",
            }
        ),
        format!("run_id:{}", run_id()),
        format!("tcp_port:{}", config.port),
        format!("server_time_usec:{now_us}"),
        format!("uptime_in_seconds:{uptime_s}"),
        format!("uptime_in_days:{}", uptime_s / 86_400),
        format!("hz:{}", config.hz),
        format!("configured_hz:{}", config.hz),
        format!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1)),
        format!("executable:{executable}"),
        format!("config_file:{config_file}"),
        format!(
            "io_threads_active:{}",
            u8::from(ctx.core.stats.io_threads_active)
        ),
    ];
    let mut lines = lines.to_vec();
    if let Some(deadline) = ctx.core.shutdown_deadline_ms {
        // Redis's conditional field while a shutdown waits for replicas.
        lines.push(format!(
            "shutdown_in_milliseconds:{}",
            (deadline - ctx.now_ms).max(0)
        ));
    }
    lines.push(format!("hozon_version:{}", env!("CARGO_PKG_VERSION")));
    section(out, "Server", &lines);
}

fn info_clients(ctx: &Ctx, out: &mut String) {
    let mut max_in = ctx.host.connection().map_or(0, |c| c.query_buffer_bytes);
    let mut max_out = 0;
    ctx.host.for_each_client(&mut |_, conn| {
        max_in = max_in.max(conn.query_buffer_bytes);
        max_out = max_out.max(conn.output_bytes);
    });
    let lines = [
        format!(
            "connected_clients:{}",
            // On a replica, Redis's master client counts once the stream flows.
            ctx.host.connected_clients()
                + usize::from(
                    ctx.core
                        .replica
                        .master
                        .as_ref()
                        .is_some_and(|m| m.link_up())
                )
        ),
        "cluster_connections:0".to_string(),
        format!("maxclients:{}", ctx.core.config.maxclients),
        format!("client_recent_max_input_buffer:{max_in}"),
        format!("client_recent_max_output_buffer:{max_out}"),
        format!(
            "blocked_clients:{}",
            ctx.core.clients.blocked_count() + ctx.core.pauses.waiting_clients
        ),
        format!("tracking_clients:{}", ctx.core.tracking.client_count()),
        format!(
            "clients_in_timeout_table:{}",
            ctx.core.clients.timeout_count()
        ),
    ];
    section(out, "Clients", &lines);
}

/// Memory figures. `used_memory` is what the server's counting allocator
/// reports (every allocation of the process, like Redis's zmalloc
/// counter); an embedded engine without one reports the resident set size.
fn info_memory(ctx: &Ctx, out: &mut String) {
    let rss = process_rss();
    let (used, peak, startup, allocator) = match ctx.host.used_memory() {
        Some(m) => (
            m.used,
            m.peak.max(m.used),
            m.startup.min(m.used),
            m.allocator,
        ),
        None => (rss, rss, 0, ""),
    };
    // An embedder's allocator is its own; Redis says `libc` for malloc.
    let allocator = if allocator.is_empty() {
        "libc"
    } else {
        allocator
    };
    let repl_buffer = ctx.core.repl.buffer.as_ref();
    let mut clients_mem = ctx.host.connection().map_or(0, |c| c.total_bytes as u64);
    ctx.host
        .for_each_client(&mut |_, conn| clients_mem += conn.total_bytes as u64);
    let overhead = (startup + clients_mem).min(used);
    let dataset = used - overhead;
    let net = used.saturating_sub(startup);
    let perc = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let total_system = proc_kb_field(&proc_text("/proc/meminfo"), "MemTotal:");
    // A script calling INFO runs while the Lua state is out of Core: it
    // reports none then.
    let (lua, scripts, cached) = super::super::scripting::state(ctx.core).map_or((0, 0, 0), |s| {
        (s.lua_bytes() as u64, s.scripts_bytes() as u64, s.cached())
    });
    let vm_functions = ctx
        .core
        .function_engine
        .get::<crate::script::functions::FunctionEngine>()
        .map_or(0, |f| f.lua_bytes() as u64);
    let functions = &ctx.core.functions;
    let (function_count, library_count) = (functions.function_count(), functions.len());
    let functions_bytes = functions.code_bytes() as u64;
    let vm_total = lua + vm_functions;
    let scripts_total = scripts + functions_bytes;
    let config = &ctx.core.config;
    let policy = config::MAXMEMORY_POLICIES
        .get(config.maxmemory_policy)
        .copied()
        .unwrap_or("noeviction");
    let lines = [
        format!("used_memory:{used}"),
        format!("used_memory_human:{}", bytes_to_human(used)),
        format!("used_memory_rss:{rss}"),
        format!("used_memory_rss_human:{}", bytes_to_human(rss)),
        format!("used_memory_peak:{peak}"),
        format!("used_memory_peak_human:{}", bytes_to_human(peak)),
        format!("used_memory_peak_perc:{:.2}%", perc(used, peak)),
        format!("used_memory_overhead:{overhead}"),
        format!("used_memory_startup:{startup}"),
        format!("used_memory_dataset:{dataset}"),
        format!("used_memory_dataset_perc:{:.2}%", perc(dataset, net)),
        format!("allocator_allocated:{used}"),
        format!("allocator_active:{used}"),
        format!("allocator_resident:{rss}"),
        format!("total_system_memory:{total_system}"),
        format!("total_system_memory_human:{}", bytes_to_human(total_system)),
        format!("used_memory_lua:{lua}"),
        format!("used_memory_vm_eval:{lua}"),
        format!("used_memory_lua_human:{}", bytes_to_human(lua)),
        format!("used_memory_scripts_eval:{scripts}"),
        format!("number_of_cached_scripts:{cached}"),
        format!("number_of_functions:{function_count}"),
        format!("number_of_libraries:{library_count}"),
        format!("used_memory_vm_functions:{vm_functions}"),
        format!("used_memory_vm_total:{vm_total}"),
        format!("used_memory_vm_total_human:{}", bytes_to_human(vm_total)),
        format!("used_memory_functions:{functions_bytes}"),
        format!("used_memory_scripts:{scripts_total}"),
        format!(
            "used_memory_scripts_human:{}",
            bytes_to_human(scripts_total)
        ),
        format!("maxmemory:{}", config.maxmemory),
        format!("maxmemory_human:{}", bytes_to_human(config.maxmemory)),
        format!("maxmemory_policy:{policy}"),
        "allocator_frag_ratio:1.00".to_string(),
        "allocator_frag_bytes:0".to_string(),
        format!("allocator_rss_ratio:{:.2}", ratio(rss, used)),
        format!("allocator_rss_bytes:{}", rss as i64 - used as i64),
        "rss_overhead_ratio:1.00".to_string(),
        "rss_overhead_bytes:0".to_string(),
        format!("mem_fragmentation_ratio:{:.2}", ratio(rss, used)),
        format!("mem_fragmentation_bytes:{}", rss as i64 - used as i64),
        format!(
            "mem_not_counted_for_evict:{}",
            ctx.core.not_counted_memory()
        ),
        format!(
            "mem_replication_backlog:{}",
            repl_buffer.map_or(0, crate::repl::buffer::ReplBuffer::backlog_memory)
        ),
        format!(
            "mem_total_replication_buffers:{}",
            repl_buffer.map_or(0, crate::repl::buffer::ReplBuffer::memory)
        ),
        "mem_clients_slaves:0".to_string(),
        format!("mem_clients_normal:{clients_mem}"),
        "mem_cluster_links:0".to_string(),
        "mem_aof_buffer:0".to_string(),
        format!("mem_allocator:{allocator}"),
        "active_defrag_running:0".to_string(),
        "lazyfree_pending_objects:0".to_string(),
        "lazyfreed_objects:0".to_string(),
    ];
    section(out, "Memory", &lines);
}

fn info_persistence(ctx: &Ctx, out: &mut String) {
    // While the files read at startup or a replica's full sync load
    // (`loading:1`, commands without the `loading` flag refused), or a
    // full sync loads beside the old data it serves (`async_loading:1`),
    // the `loading_*` fields follow.
    let startup_load = ctx.core.startup_load.as_ref();
    let aof = ctx.core.aof_status();
    let save = &ctx.core.save;
    let rewrite = &ctx.core.rewrite;
    let job = save.job.as_ref();
    let write_ok = aof
        .as_ref()
        .is_none_or(|a| a.write_error.is_none() && a.poisoned.is_none());
    let sync_load = ctx
        .core
        .replica
        .master
        .as_ref()
        .and_then(|m| m.loading.as_ref());
    let mut lines = vec![
        format!(
            "loading:{}",
            u8::from(startup_load.is_some() || sync_load.is_some_and(|l| !l.asynchronous))
        ),
        format!(
            "async_loading:{}",
            u8::from(sync_load.is_some_and(|l| l.asynchronous))
        ),
        "current_cow_peak:0".to_string(),
        "current_cow_size:0".to_string(),
        "current_cow_size_age:0".to_string(),
        "current_fork_perc:0.00".to_string(),
        format!(
            "current_save_keys_processed:{}",
            job.map_or(0, |j| j.keys_processed)
        ),
        format!(
            "current_save_keys_total:{}",
            job.map_or(0, |j| j.keys_total)
        ),
        format!("rdb_changes_since_last_save:{}", ctx.core.dirty),
        format!(
            "rdb_bgsave_in_progress:{}",
            u8::from(job.is_some() || ctx.core.repl_sync_running())
        ),
        format!("rdb_last_save_time:{}", save.last_save_ms / 1000),
        format!(
            "rdb_last_bgsave_status:{}",
            if save.last_bgsave_ok { "ok" } else { "err" }
        ),
        format!("rdb_last_bgsave_time_sec:{}", save.last_bgsave_secs),
        format!(
            "rdb_current_bgsave_time_sec:{}",
            job.map_or(-1, |j| (ctx.now_ms - j.started_ms) / 1000)
        ),
        format!("rdb_saves:{}", save.saves),
        "rdb_last_cow_size:0".to_string(),
        format!("rdb_last_load_keys_expired:{}", save.last_load_expired),
        format!("rdb_last_load_keys_loaded:{}", save.last_load_keys),
        format!("aof_enabled:{}", u8::from(aof.is_some())),
        format!(
            "aof_rewrite_in_progress:{}",
            u8::from(rewrite.in_progress())
        ),
        format!("aof_rewrite_scheduled:{}", u8::from(rewrite.scheduled)),
        format!("aof_last_rewrite_time_sec:{}", rewrite.last_secs),
        format!(
            "aof_current_rewrite_time_sec:{}",
            rewrite
                .job
                .as_ref()
                .map_or(-1, |j| (ctx.now_ms - j.started_ms) / 1000)
        ),
        format!(
            "aof_last_bgrewrite_status:{}",
            if rewrite.last_ok { "ok" } else { "err" }
        ),
        format!("aof_rewrites:{}", rewrite.rewrites),
        format!(
            "aof_rewrites_consecutive_failures:{}",
            rewrite.consecutive_failures
        ),
        format!(
            "aof_last_write_status:{}",
            if write_ok { "ok" } else { "err" }
        ),
        "aof_last_cow_size:0".to_string(),
        "module_fork_in_progress:0".to_string(),
        "module_fork_last_cow_size:0".to_string(),
    ];
    if let Some(aof) = aof {
        lines.extend([
            format!("aof_current_size:{}", aof.current_size),
            format!("aof_base_size:{}", aof.base_size),
            format!("aof_pending_rewrite:{}", u8::from(rewrite.scheduled)),
            "aof_buffer_length:0".to_string(),
            format!("aof_rewrite_buffer_length:{}", rewrite.diff_pending()),
            format!("aof_pending_bio_fsync:{}", u8::from(aof.pending_bio_fsync)),
            format!("aof_delayed_fsync:{}", aof.delayed_fsync),
        ]);
        lines.extend(super::super::observe::persistence_lines(
            ctx.core, ctx.now_ms,
        ));
    }
    if let Some(load) = startup_load.or(sync_load) {
        lines.extend(load.info_lines(ctx.now_ms));
    }
    section(out, "Persistence", &lines);
}

fn info_stats(ctx: &Ctx, out: &mut String) {
    let s = &ctx.core.stats;
    let rs = &ctx.core.repl.stats;
    let ob = &ctx.core.observe;
    // Redis's `(float)getInstantaneousMetric(...)/1024` printed `%.2f`.
    let kbps = |kind| format!("{:.2}", ob.instantaneous(kind) as f32 / 1024.0);
    let lines = [
        format!("total_connections_received:{}", s.connections_received),
        format!("total_commands_processed:{}", s.commands_processed),
        format!(
            "instantaneous_ops_per_sec:{}",
            ob.instantaneous(MetricKind::Commands)
        ),
        format!("total_net_input_bytes:{}", s.net_input_bytes),
        format!("total_net_output_bytes:{}", s.net_output_bytes),
        format!("total_net_repl_input_bytes:{}", rs.net_repl_input_bytes),
        format!("total_net_repl_output_bytes:{}", rs.net_repl_output_bytes),
        format!("instantaneous_input_kbps:{}", kbps(MetricKind::NetInput)),
        format!("instantaneous_output_kbps:{}", kbps(MetricKind::NetOutput)),
        format!(
            "instantaneous_input_repl_kbps:{}",
            kbps(MetricKind::ReplInput)
        ),
        format!(
            "instantaneous_output_repl_kbps:{}",
            kbps(MetricKind::ReplOutput)
        ),
        format!("rejected_connections:{}", s.rejected_connections),
        format!("sync_full:{}", rs.sync_full),
        format!("sync_partial_ok:{}", rs.sync_partial_ok),
        format!("sync_partial_err:{}", rs.sync_partial_err),
        format!("expired_keys:{}", s.expired_keys),
        "expired_stale_perc:0.00".to_string(),
        "expired_time_cap_reached_count:0".to_string(),
        "expire_cycle_cpu_milliseconds:0".to_string(),
        format!("evicted_keys:{}", s.evicted_keys),
        "evicted_clients:0".to_string(),
        "total_eviction_exceeded_time:0".to_string(),
        "current_eviction_exceeded_time:0".to_string(),
        format!("keyspace_hits:{}", s.keyspace_hits),
        format!("keyspace_misses:{}", s.keyspace_misses),
        format!("pubsub_channels:{}", ctx.core.clients.channel_count(false)),
        format!("pubsub_patterns:{}", ctx.core.clients.pattern_count()),
        format!(
            "pubsubshard_channels:{}",
            ctx.core.clients.channel_count(true)
        ),
        "latest_fork_usec:0".to_string(),
        "total_forks:0".to_string(),
        format!("migrate_cached_sockets:{}", ctx.core.migrate_sockets.len()),
        format!(
            "slave_expires_tracked_keys:{}",
            ctx.core.replica_expires.len()
        ),
        "active_defrag_hits:0".to_string(),
        "active_defrag_misses:0".to_string(),
        "active_defrag_key_hits:0".to_string(),
        "active_defrag_key_misses:0".to_string(),
        "total_active_defrag_time:0".to_string(),
        "current_active_defrag_time:0".to_string(),
        format!("tracking_total_keys:{}", ctx.core.tracking.key_count()),
        format!("tracking_total_items:{}", ctx.core.tracking.item_count()),
        format!(
            "tracking_total_prefixes:{}",
            ctx.core.tracking.prefix_count()
        ),
        format!("unexpected_error_replies:{}", s.unexpected_error_replies),
        format!("total_error_replies:{}", ob.total_error_replies),
        "dump_payload_sanitizations:0".to_string(),
        format!("total_reads_processed:{}", s.reads_processed),
        format!("total_writes_processed:{}", s.writes_processed),
        "io_threaded_reads_processed:0".to_string(),
        format!(
            "io_threaded_writes_processed:{}",
            s.io_threaded_writes_processed
        ),
        "reply_buffer_shrinks:0".to_string(),
        "reply_buffer_expands:0".to_string(),
    ];
    section(out, "Stats", &lines);
}

fn info_replication(ctx: &Ctx, out: &mut String) {
    let repl = &ctx.core.repl;
    let now_s = ctx.now_ms / 1000;
    let mut lines = crate::command::replicaof::info_lines(ctx)
        .unwrap_or_else(|| vec!["role:master".to_string()]);
    lines.push(format!("connected_slaves:{}", repl.replicas.len()));
    let settings = &ctx.core.config.repl;
    if settings.min_replicas_to_write > 0 && settings.min_replicas_max_lag_s > 0 {
        lines.push(format!(
            "min_slaves_good_slaves:{}",
            repl.good_replicas(ctx.now_ms, settings.min_replicas_max_lag_s)
        ));
    }
    for (i, replica) in repl.replicas.values().enumerate() {
        let lag = if replica.state == crate::core::repl::ReplicaState::Online {
            now_s - replica.ack_time_ms / 1000
        } else {
            0
        };
        lines.push(format!(
            "slave{i}:ip={},port={},state={},offset={},lag={lag}",
            replica.ip,
            replica.conf.listening_port,
            replica.state.name(),
            replica.ack_off,
        ));
    }
    let (first, histlen) = repl.buffer.as_ref().map_or((0, 0), |b| {
        (b.backlog_first_byte_offset(), b.backlog_histlen())
    });
    lines.extend([
        format!("master_failover_state:{}", ctx.core.failover_state_name()),
        format!("master_replid:{}", repl.replid),
        format!("master_replid2:{}", repl.replid2),
        format!(
            "master_repl_offset:{}",
            ctx.core
                .replica
                .master
                .as_ref()
                .map_or(repl.master_repl_offset(), |m| m.reploff)
        ),
        format!("second_repl_offset:{}", repl.second_replid_offset),
        format!("repl_backlog_active:{}", u8::from(repl.buffer.is_some())),
        format!("repl_backlog_size:{}", ctx.core.config.repl.backlog_size),
        format!("repl_backlog_first_byte_offset:{first}"),
        format!("repl_backlog_histlen:{histlen}"),
    ]);
    section(out, "Replication", &lines);
}

fn info_cpu(out: &mut String) {
    let (sys, user) = cpu_times("/proc/self/stat");
    let (main_sys, main_user) = cpu_times("/proc/thread-self/stat");
    let lines = [
        format!("used_cpu_sys:{sys}"),
        format!("used_cpu_user:{user}"),
        "used_cpu_sys_children:0.000000".to_string(),
        "used_cpu_user_children:0.000000".to_string(),
        format!("used_cpu_sys_main_thread:{main_sys}"),
        format!("used_cpu_user_main_thread:{main_user}"),
    ];
    section(out, "CPU", &lines);
}

/// Average remaining TTL of a database's keys, estimated from a bounded
/// sample of keys with a TTL (Redis keeps a running estimate maintained by
/// active expiry; a sample keeps INFO cheap on a large keyspace).
fn avg_ttl_ms(ctx: &Ctx, db: usize) -> i64 {
    const SAMPLE_KEYS: usize = 1024;
    const VISIT_LIMIT: usize = 16 * 1024;
    let database = ctx.core.keyspace.db(db);
    if database.expires_len() == 0 {
        return 0;
    }
    let (mut sum, mut count) = (0i64, 0i64);
    for (key, _) in database.iter().take(VISIT_LIMIT) {
        if let Some(at) = database.expire_at(key) {
            sum += (at - ctx.now_ms).max(0);
            count += 1;
            if count as usize >= SAMPLE_KEYS {
                break;
            }
        }
    }
    if count == 0 {
        0
    } else {
        sum / count
    }
}

fn info_keyspace(ctx: &Ctx, out: &mut String) {
    let mut lines = Vec::new();
    for db in 0..ctx.core.keyspace.db_count() {
        let database = ctx.core.keyspace.db(db);
        let (keys, expires) = (database.len(), database.expires_len());
        if keys > 0 || expires > 0 {
            lines.push(format!(
                "db{db}:keys={keys},expires={expires},avg_ttl={}",
                avg_ttl_ms(ctx, db)
            ));
        }
    }
    section(out, "Keyspace", &lines);
}

fn section(out: &mut String, title: &str, lines: &[String]) {
    if !out.is_empty() {
        out.push_str("\r\n");
    }
    out.push_str("# ");
    out.push_str(title);
    out.push_str("\r\n");
    for line in lines {
        out.push_str(line);
        out.push_str("\r\n");
    }
}

/// The INFO text for the given section arguments (Redis's
/// `genInfoSectionDict` + `genRedisInfoString`).
pub fn info_text(ctx: &Ctx, args: &[&[u8]]) -> String {
    let mut wanted: Vec<String> = Vec::new();
    let mut all = false;
    if args.is_empty() {
        wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    for arg in args {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            "all" | "everything" => all = true,
            _ => wanted.push(name),
        }
    }
    let want = |name: &str| all || wanted.iter().any(|w| w == name);
    let mut out = String::new();
    if want("server") {
        info_server(ctx, &mut out);
    }
    if want("clients") {
        info_clients(ctx, &mut out);
    }
    if want("memory") {
        info_memory(ctx, &mut out);
    }
    if want("persistence") {
        info_persistence(ctx, &mut out);
    }
    if want("stats") {
        info_stats(ctx, &mut out);
    }
    if want("replication") {
        info_replication(ctx, &mut out);
    }
    if want("cpu") {
        info_cpu(&mut out);
    }
    if want("module_list") || want("modules") {
        section(&mut out, "Modules", &[]);
    }
    if want("commandstats") {
        section(
            &mut out,
            "Commandstats",
            &super::super::observe::commandstats_lines(ctx.core),
        );
    }
    if want("errorstats") {
        section(
            &mut out,
            "Errorstats",
            &super::super::observe::errorstats_lines(ctx.core),
        );
    }
    if want("latencystats") {
        section(
            &mut out,
            "Latencystats",
            &super::super::observe::latencystats_lines(ctx.core),
        );
    }
    if want("cluster") {
        section(&mut out, "Cluster", &["cluster_enabled:0".to_string()]);
    }
    if want("keyspace") {
        info_keyspace(ctx, &mut out);
    }
    out
}

pub(super) fn info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Verbatim(
        *b"txt",
        info_text(ctx, &argv[1..]).into_bytes(),
    ))
}
