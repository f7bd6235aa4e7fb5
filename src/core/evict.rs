//! `maxmemory` and the eight eviction policies, as Redis 7.0's evict.c
//! does them (docs/memory.md): before a command, when the memory in use
//! (less the AOF and replica buffers) exceeds `maxmemory`, keys are removed
//! until it does not, chosen by the policy: a sampled approximation with a
//! 16-entry pool for the LRU, LFU and TTL policies, one random key per
//! database in turn for the random ones. Each eviction is logged as `DEL`,
//! counted (`evicted_keys`), notified (`evicted`) and signalled (WATCH,
//! blocked clients, client-side caching).
//!
//! Also the per-key access field's upkeep on lookups ([`Toucher`]).

use super::Core;
use crate::keyspace::access;
use crate::persist::aof::Effect;
use crate::types::Blob;

/// Redis's refusal of a deny-oom command over the limit.
pub(crate) const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Entries in the eviction pool (`EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// `maxmemory-policy` values (indices into `config::MAXMEMORY_POLICIES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

impl Policy {
    /// The policy at `index` in `MAXMEMORY_POLICIES`.
    pub(crate) fn from_index(index: usize) -> Policy {
        match index {
            0 => Policy::VolatileLru,
            1 => Policy::VolatileLfu,
            2 => Policy::VolatileRandom,
            3 => Policy::VolatileTtl,
            4 => Policy::AllkeysLru,
            5 => Policy::AllkeysLfu,
            6 => Policy::AllkeysRandom,
            _ => Policy::NoEviction,
        }
    }

    /// An LFU policy (`MAXMEMORY_FLAG_LFU`).
    pub(crate) fn is_lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    /// An LRU or LFU policy (`MAXMEMORY_FLAG_NO_SHARED_INTEGERS`).
    pub(crate) fn tracks_access(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru | Policy::VolatileLfu | Policy::AllkeysLru | Policy::AllkeysLfu
        )
    }

    /// Only keys with a TTL are candidates.
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// The outcome of [`Core::perform_evictions`] (Redis's `EVICT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// Within the limit (or evicting is not allowed now).
    Ok,
    /// Still over the limit when the time limit ended the run (or a run
    /// continues from the timer): commands run, and the server's timer
    /// ([`EvictState::timer`]) evicts more.
    Running,
    /// Over the limit with nothing (more) to evict: deny-oom commands are
    /// refused.
    Fail,
}

/// One candidate of the pool.
#[derive(Debug, Clone)]
struct Candidate {
    /// Higher is evicted first.
    idle: u64,
    db: usize,
    key: Blob,
}

/// What eviction keeps between runs: the pool (best candidates last), the
/// next database of the random policies, and whether the memory was over
/// the limit with nothing to evict when the running command started
/// (Redis's `pre_command_oom_state`, which scripts consult).
#[derive(Debug, Default)]
pub(crate) struct EvictState {
    pool: Vec<Candidate>,
    next_db: usize,
    /// `pre_command_oom_state`.
    pub(crate) pre_command_oom: bool,
    /// A run ended by `maxmemory-eviction-tenacity` with memory still to
    /// free: the host continues it between event-loop turns until it ends
    /// (Redis's `isEvictionProcRunning` and `evictionTimeProc`).
    pub(crate) timer: bool,
}

/// How a lookup updates a key's access field, computed once per lookup
/// from the core's clock and policy so the table probe can apply it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Toucher {
    lfu: bool,
    clock: u32,
    minutes: u32,
    decay: u64,
    factor: u64,
    r: f64,
}

impl Toucher {
    /// The access field after an access (Redis's `lookupKey`: the LRU
    /// clock, or `updateLFU`).
    pub(crate) fn apply(self, stored: u32) -> u32 {
        if self.lfu {
            access::lfu_touched(stored, self.minutes, self.decay, self.factor, self.r)
        } else {
            self.clock
        }
    }
}

impl Core {
    /// The configured policy.
    pub(crate) fn policy(&self) -> Policy {
        Policy::from_index(self.config.maxmemory_policy)
    }

    /// The access update of a lookup at `now_ms` (one random draw under
    /// LFU, for `LFULogIncr`).
    pub(crate) fn toucher(&mut self, now_ms: i64) -> Toucher {
        let lfu = self.policy().is_lfu();
        let r = if lfu {
            (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        } else {
            0.0
        };
        Toucher {
            lfu,
            clock: access::lru_clock(now_ms),
            minutes: access::lfu_minutes(now_ms),
            decay: self.config.lfu_decay_time,
            factor: self.config.lfu_log_factor,
            r,
        }
    }

    /// Records an access to `key` of database `db`; false when absent.
    pub(crate) fn touch(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        let toucher = self.toucher(now_ms);
        self.keyspace
            .db_mut(db)
            .update_access(key, |a| toucher.apply(a))
    }

    /// Refreshes the access field new keys get (cron, and a change of
    /// policy).
    pub(crate) fn refresh_access_clock(&mut self, now_ms: i64) {
        let lfu = self.policy().is_lfu();
        self.keyspace.set_access_mode(lfu, now_ms);
    }

    /// The access record RDB files written now give each key (Redis's
    /// `rdbSaveKeyValuePair`: IDLE under an LRU policy, FREQ under LFU).
    pub(crate) fn key_access_record(&self, now_ms: i64) -> crate::rdb::writer::KeyAccessRecord {
        use crate::rdb::writer::KeyAccessRecord;
        match self.policy() {
            Policy::VolatileLru | Policy::AllkeysLru => KeyAccessRecord::Idle {
                clock: access::lru_clock(now_ms),
            },
            Policy::VolatileLfu | Policy::AllkeysLfu => KeyAccessRecord::Freq {
                minutes: access::lfu_minutes(now_ms),
                decay_time: self.config.lfu_decay_time,
            },
            _ => KeyAccessRecord::None,
        }
    }

    /// OBJECT IDLETIME of a key's access field at `now_ms`, in seconds.
    pub(crate) fn idle_seconds(&self, stored: u32, now_ms: i64) -> u64 {
        access::idle_ms(access::lru_clock(now_ms), stored) / 1000
    }

    /// OBJECT FREQ of a key's access field at `now_ms`.
    pub(crate) fn frequency(&self, stored: u32, now_ms: i64) -> u32 {
        access::lfu_decayed(
            stored,
            access::lfu_minutes(now_ms),
            self.config.lfu_decay_time,
        )
    }

    /// Memory Redis does not count against `maxmemory` (its
    /// `freeMemoryGetNotCountedMemory`): the AOF batch being built and the
    /// replication buffer beyond the backlog's share; and, as Redis does
    /// not count a fork's copied pages, what a BGSAVE or rewrite capture in
    /// progress holds (`Keyspace::capture_held_bytes`).
    pub(crate) fn not_counted_memory(&self) -> u64 {
        let aof = self.aof.as_ref().map_or(0, |a| a.batch_bytes());
        let repl = self
            .repl
            .buffer
            .as_ref()
            .map_or(0, |b| b.memory().saturating_sub(b.backlog_memory()));
        (aof + repl + self.keyspace.capture_held_bytes()) as u64
    }

    /// True when evicting is allowed now (Redis's
    /// `isSafeToPerformEvictions`): not while loading, not on a replica
    /// that ignores maxmemory, not while writes are paused.
    fn may_evict(&self) -> bool {
        let ignoring_replica = self.replica.is_replica() && self.config.replica_ignore_maxmemory;
        let held = self.loading
            || self.startup_load.is_some()
            || ignoring_replica
            || self.pauses.writes_paused();
        !held
    }

    /// Redis's `performEvictions`: with `used` the memory in use (None:
    /// unknown, nothing is done), evicts keys by the policy until the
    /// memory less [`Core::not_counted_memory`] is within `maxmemory`, or
    /// `maxmemory-eviction-tenacity`'s time is spent, or nothing is left
    /// to evict. The evictions' DELs are pushed to `effects`, each its own
    /// unit for the caller to log.
    pub(crate) fn perform_evictions(&mut self, used: &mut dyn FnMut() -> Option<u64>) -> Eviction {
        let limit = self.config.maxmemory;
        if limit == 0 || !self.may_evict() {
            return Eviction::Ok;
        }
        let Some(reported) = used() else {
            return Eviction::Ok;
        };
        if reported <= limit {
            return Eviction::Ok;
        }
        let counted = reported.saturating_sub(self.not_counted_memory());
        if counted <= limit {
            return Eviction::Ok;
        }
        let to_free = counted - limit;
        let policy = self.policy();
        if policy == Policy::NoEviction {
            return Eviction::Fail;
        }
        let time_limit = time_limit_us(self.config.maxmemory_eviction_tenacity);
        let started = std::time::Instant::now();
        let mut freed: i64 = 0;
        let mut keys_freed = 0u64;
        while freed < to_free as i64 {
            let Some((db, key)) = self.pick(policy) else {
                return Eviction::Fail;
            };
            // Measured less what stays held for a capture in progress (a
            // removed key's old value is kept until the capture emits it).
            let held = |core: &Core| core.keyspace.capture_held_bytes() as i64;
            let before = used().unwrap_or(0) as i64 - held(self);
            self.keyspace.db_mut(db).remove(&key);
            let after = used().unwrap_or(0) as i64 - held(self);
            freed += before - after;
            self.stats.evicted_keys += 1;
            self.signal_modified(db, &key);
            self.notify_evicted(db, &key);
            self.effects.push(Effect {
                db,
                argv: vec![b"DEL".to_vec(), key.to_vec()],
            });
            keys_freed += 1;
            if keys_freed.is_multiple_of(16) && started.elapsed().as_micros() as u64 > time_limit {
                // Redis's startEvictionTimeProc: continue from the timer.
                self.evict.timer = true;
                break;
            }
        }
        if self.evict.timer {
            Eviction::Running
        } else {
            Eviction::Ok
        }
    }

    /// Redis's `evictionTimeProc`: continues an eviction run that
    /// `maxmemory-eviction-tenacity` cut short, and stops the timer once a
    /// run ends within the limit or with nothing left to evict.
    pub(crate) fn eviction_timer(&mut self, used: &mut dyn FnMut() -> Option<u64>) {
        if self.perform_evictions(used) != Eviction::Running {
            self.evict.timer = false;
        }
    }

    /// The next key to evict under `policy`, if any.
    fn pick(&mut self, policy: Policy) -> Option<(usize, Blob)> {
        let dbs = self.keyspace.db_count();
        if matches!(policy, Policy::AllkeysRandom | Policy::VolatileRandom) {
            for _ in 0..dbs {
                self.evict.next_db = (self.evict.next_db + 1) % dbs;
                let j = self.evict.next_db;
                let db = self.keyspace.db(j);
                if let Some(key) = db.random_for_eviction(&mut self.rng, policy.volatile()) {
                    return Some((j, key));
                }
            }
            return None;
        }
        loop {
            let mut total = 0;
            for j in 0..dbs {
                let db = self.keyspace.db(j);
                let size = if policy.volatile() {
                    db.expires_len()
                } else {
                    db.len()
                };
                if size > 0 {
                    self.populate(policy, j);
                    total += size;
                }
            }
            if total == 0 {
                return None;
            }
            // The best candidate still present (a pool entry may be stale).
            while let Some(c) = self.evict.pool.pop() {
                let db = self.keyspace.db(c.db);
                let present = if policy.volatile() {
                    db.expire_at(&c.key).is_some()
                } else {
                    db.contains(&c.key)
                };
                if present {
                    return Some((c.db, c.key));
                }
            }
        }
    }

    /// Redis's `evictionPoolPopulate`: samples `maxmemory-samples` keys of
    /// database `j` and keeps the pool's best 16 in ascending order.
    fn populate(&mut self, policy: Policy, j: usize) {
        let now = crate::clock::now_ms();
        let clock = access::lru_clock(now);
        let minutes = access::lfu_minutes(now);
        let decay = self.config.lfu_decay_time;
        let samples = self.config.maxmemory_samples.max(1) as usize;
        let sample =
            self.keyspace
                .db(j)
                .sample_for_eviction(&mut self.rng, samples, policy.volatile());
        let pool = &mut self.evict.pool;
        for (key, stored, expire) in sample {
            let idle = match policy {
                Policy::VolatileLru | Policy::AllkeysLru => access::idle_ms(clock, stored),
                Policy::VolatileLfu | Policy::AllkeysLfu => {
                    255 - u64::from(access::lfu_decayed(stored, minutes, decay))
                }
                _ => u64::MAX - expire.unwrap_or(0).max(0) as u64,
            };
            if pool.iter().any(|c| c.db == j && c.key == key) {
                continue;
            }
            let k = pool.iter().take_while(|c| c.idle < idle).count();
            let candidate = Candidate { idle, db: j, key };
            if pool.len() < POOL_SIZE {
                pool.insert(k, candidate);
            } else if k > 0 {
                // Full: the worst (first) goes, the new one takes its rank.
                pool.remove(0);
                pool.insert(k - 1, candidate);
            }
        }
    }
}

/// Redis's `evictionTimeLimitUs`: how long one run may evict, from
/// `maxmemory-eviction-tenacity` (0..=10 linear up to 500 µs, then 15%
/// more per step, 100 unlimited).
fn time_limit_us(tenacity: u32) -> u64 {
    if tenacity <= 10 {
        50 * u64::from(tenacity)
    } else if tenacity < 100 {
        (500.0 * 1.15f64.powf(f64::from(tenacity) - 10.0)) as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::types::Value;

    fn core_with(policy: &str, keys: usize) -> Engine {
        let mut engine = Engine::open(Config::in_memory()).expect("in-memory config");
        let core = engine.core();
        core.config.maxmemory_policy = crate::config::MAXMEMORY_POLICIES
            .iter()
            .position(|p| *p == policy)
            .expect("a policy");
        core.config.maxmemory = 1000;
        for i in 0..keys {
            let key = format!("k{i}");
            core.keyspace
                .db_mut(0)
                .insert_new(key.as_bytes(), Value::Str(Blob::new(b"v")));
            if i % 2 == 0 {
                core.keyspace
                    .db_mut(0)
                    .set_expire(key.as_bytes(), 1_000_000 + i as i64);
            }
        }
        engine
    }

    /// Evicts with a memory figure of `start` that falls by 100 per key
    /// removed: the first read is the check, then two per eviction (before
    /// and after the removal).
    fn evict_down_to(engine: &mut Engine, start: u64) -> (Eviction, u64) {
        let mut calls = 0u64;
        let mut evicted = 0u64;
        let mut used = || {
            calls += 1;
            if calls >= 3 && calls % 2 == 1 {
                evicted += 1;
            }
            Some(start.saturating_sub(100 * evicted))
        };
        let result = engine.core().perform_evictions(&mut used);
        (result, engine.core().stats.evicted_keys)
    }

    #[test]
    fn noeviction_fails_and_removes_nothing() {
        let mut engine = core_with("noeviction", 10);
        let (result, evicted) = evict_down_to(&mut engine, 5000);
        assert_eq!(result, Eviction::Fail);
        assert_eq!(evicted, 0);
        assert_eq!(engine.core().keyspace.db(0).len(), 10);
    }

    #[test]
    fn volatile_policies_evict_only_keys_with_a_ttl_then_fail() {
        for policy in [
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            let mut engine = core_with(policy, 10);
            let (result, evicted) = evict_down_to(&mut engine, 100_000);
            assert_eq!(result, Eviction::Fail, "{policy}");
            assert_eq!(evicted, 5, "{policy}");
            let db = engine.core().keyspace.db(0);
            assert_eq!(db.len(), 5, "{policy}");
            assert_eq!(db.expires_len(), 0, "{policy}");
            let dels = engine.core().effects.len();
            assert_eq!(dels, 5, "{policy}: one DEL per eviction");
        }
    }

    #[test]
    fn allkeys_policies_stop_at_the_limit() {
        for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            let mut engine = core_with(policy, 10);
            // 1500 in use, limit 1000: five keys of 100 each.
            let (result, evicted) = evict_down_to(&mut engine, 1500);
            assert_eq!(result, Eviction::Ok, "{policy}");
            assert_eq!(evicted, 5, "{policy}");
        }
    }

    #[test]
    fn volatile_ttl_evicts_the_nearest_expiry_first() {
        let mut engine = core_with("volatile-ttl", 10);
        engine.core().config.maxmemory_samples = 64;
        let (_, evicted) = evict_down_to(&mut engine, 1100);
        assert_eq!(evicted, 1);
        assert!(!engine.core().keyspace.db(0).contains(b"k0"));
    }

    // The memory figure of the capture test below: what the test's own
    // thread has allocated, counted per thread (other tests run on other
    // threads) as glibc's chunks, the server's `CountingAlloc` arithmetic.
    struct ThreadCountingAlloc;

    std::thread_local! {
        static THREAD_BYTES: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    }

    fn chunk(size: usize) -> i64 {
        ((size + 8 + 15) & !15).max(32) as i64
    }

    fn counted(delta: i64) {
        let _ = THREAD_BYTES.try_with(|c| c.set(c.get() + delta));
    }

    // SAFETY: every method forwards to `System` with the caller's
    // arguments; the counter is only a statistic.
    unsafe impl std::alloc::GlobalAlloc for ThreadCountingAlloc {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            // SAFETY: same contract as the caller's.
            let p = unsafe { std::alloc::System.alloc(layout) };
            if !p.is_null() {
                counted(chunk(layout.size()));
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
            // SAFETY: same contract as the caller's.
            let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
            if !p.is_null() {
                counted(chunk(layout.size()));
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            // SAFETY: same contract as the caller's.
            unsafe { std::alloc::System.dealloc(ptr, layout) };
            counted(-chunk(layout.size()));
        }

        unsafe fn realloc(
            &self,
            ptr: *mut u8,
            layout: std::alloc::Layout,
            new_size: usize,
        ) -> *mut u8 {
            // SAFETY: same contract as the caller's.
            let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                counted(chunk(new_size) - chunk(layout.size()));
            }
            p
        }
    }

    #[global_allocator]
    static ALLOCATOR: ThreadCountingAlloc = ThreadCountingAlloc;

    /// A host whose `used_memory` is what the calling thread allocated
    /// since `base`, plus 1 MiB.
    struct ThreadMemory {
        base: i64,
    }

    impl ThreadMemory {
        fn new() -> ThreadMemory {
            ThreadMemory {
                base: THREAD_BYTES.with(std::cell::Cell::get),
            }
        }
    }

    impl crate::command::ctx::Host for ThreadMemory {
        fn used_memory(&self) -> Option<crate::command::ctx::MemoryUse> {
            let used = (THREAD_BYTES.with(std::cell::Cell::get) - self.base).max(0) as u64;
            Some(crate::command::ctx::MemoryUse {
                used: used + (1 << 20),
                ..Default::default()
            })
        }
    }

    fn info_field(engine: &mut Engine, host: &mut ThreadMemory, name: &str) -> u64 {
        let session = &mut engine.new_session();
        let reply = engine.execute_with_host(session, &[b"INFO", b"memory"], host);
        let (crate::reply::Reply::Bulk(text) | crate::reply::Reply::Verbatim(_, text)) = reply
        else {
            panic!("INFO: {reply:?}")
        };
        let text = String::from_utf8(text).expect("INFO is text");
        let prefix = format!("{name}:");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("INFO memory has no {name}"))
            .trim()
            .parse()
            .expect("a number")
    }

    /// During a BGSAVE capture, the old values the capture keeps for the
    /// keys evicted (or written) before its cursor reached them, and its
    /// skip lists for the new keys, are left out of `maxmemory`: writing
    /// new keys under allkeys-lru evicts about one old key each and keeps
    /// the rest, never answering OOM. Counted, each eviction would free
    /// (net) next to nothing, and the first SET over the limit would evict
    /// every key and be refused. The capture stays open because nothing
    /// steps it (no cron steps it under group commit).
    #[test]
    fn a_capture_in_progress_does_not_make_allkeys_lru_evict_everything() {
        use crate::command::ctx::Host as _;
        use crate::reply::Reply;
        const KEYS: usize = 3000;
        let value = vec![b'v'; 1000];
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut config = Config::in_memory();
        config.dir = dir.path().to_path_buf();
        config.maxmemory_policy = crate::config::MAXMEMORY_POLICIES
            .iter()
            .position(|p| *p == "allkeys-lru")
            .expect("a policy");
        let mut engine = Engine::open(config).expect("engine opens");
        // As the server: no cron steps the capture, no effects kept.
        engine.set_group_commit(true);
        engine.set_capture_effects(false);
        let mut host = ThreadMemory::new();
        let mut session = engine.new_session();
        let mut run = |engine: &mut Engine, host: &mut ThreadMemory, argv: &[&[u8]]| {
            engine.execute_with_host(&mut session, argv, host)
        };
        for i in 0..KEYS {
            let key = format!("old:{i:06}");
            let reply = run(&mut engine, &mut host, &[b"SET", key.as_bytes(), &value]);
            assert_eq!(reply, Reply::ok());
        }
        let reply = run(&mut engine, &mut host, &[b"BGSAVE"]);
        assert!(engine.save_in_progress(), "BGSAVE: {reply:?}");
        // The limit: what is in use with the save started (its buffers
        // in), and a little more.
        let limit = host.used_memory().expect("a figure").used + 64 * 1024;
        let reply = run(
            &mut engine,
            &mut host,
            &[
                b"CONFIG",
                b"SET",
                b"maxmemory",
                limit.to_string().as_bytes(),
            ],
        );
        assert_eq!(reply, Reply::ok());

        for i in 0..KEYS {
            let key = format!("new:{i:06}");
            let reply = run(&mut engine, &mut host, &[b"SET", key.as_bytes(), &value]);
            assert_eq!(reply, Reply::ok(), "SET number {i}");
        }
        assert!(engine.save_in_progress(), "the capture is still open");
        let held = info_field(&mut engine, &mut host, "mem_not_counted_for_evict");
        let evicted = engine.core().stats.evicted_keys;
        let kept = engine.core().keyspace.db(0).len();
        assert!(held > 0, "nothing reported as held by the capture");
        assert!(
            evicted >= KEYS as u64 / 2,
            "only {evicted} evictions for {KEYS} new keys"
        );
        assert!(
            kept >= KEYS * 9 / 10,
            "{kept} of {KEYS} keys kept ({evicted} evicted)"
        );

        // Once the capture ends, nothing is held.
        let mut steps = 0;
        while engine.save_in_progress() {
            engine.background_step(std::time::Duration::from_millis(20), crate::clock::now_ms());
            steps += 1;
            assert!(steps < 1_000_000, "the BGSAVE never ended");
        }
        assert_eq!(
            info_field(&mut engine, &mut host, "mem_not_counted_for_evict"),
            0
        );
    }

    #[test]
    fn tenacity_maps_to_redis_time_limits() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert_eq!(time_limit_us(100), u64::MAX);
    }
}
