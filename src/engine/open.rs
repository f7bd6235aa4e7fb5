//! Opening an engine: the startup rule, snapshot and AOF loading, recovery.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::clock::now_ms;
use crate::command;
use crate::config::{CommandCatalog, Config, ConfigError, Invocation};
use crate::core::sync_load::{LoadCounters, SyncLoad};
use crate::core::{Core, Stats};
use crate::error::CorruptCause;
use crate::keyspace::Keyspace;
use crate::persist::aof::{self, LoadReport};
use crate::persist::io::{Io, RealIo};
use crate::persist::lock::DirLock;
use crate::persist::rewriter::RewriteState;
use crate::persist::saver::SaveState;
use crate::persist::writer::AofWriter;
use crate::rand::Rng;
use crate::reply::Reply;

use super::Engine;

/// hozon's command table, as the configuration loader sees it
/// (`rename-command`).
struct CommandTable;

impl CommandCatalog for CommandTable {
    fn real_name(&self, name: &[u8]) -> Option<&'static str> {
        command::lookup(name).map(|spec| spec.name)
    }

    fn known_to_redis(&self, name: &str) -> bool {
        command::docs::lookup(name).is_some()
    }

    /// Redis's `ACLAppendUserForLoading`: the rules applied to a scratch
    /// user.
    fn check_user(&self, name: &[u8], rules: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        if crate::acl::rules::has_spaces(name) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        command::acl::install_table();
        let refs: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
        let merged = crate::acl::rules::merge_selector_args(&refs)
            .map_err(|e| format!("Error in user declaration: {e}"))?;
        let mut scratch = crate::acl::User::new(name, false);
        for op in &merged {
            crate::acl::rules::apply(&mut scratch, op, false).map_err(|e| {
                format!(
                    "Error in user declaration '{}': {}",
                    String::from_utf8_lossy(op),
                    e.message()
                )
            })?;
        }
        Ok(merged)
    }
}

impl Config {
    /// Applies configuration text (redis.conf syntax: `name value …` per
    /// line, `#` comments, quoting as in redis-cli, `include <file>`),
    /// `rename-command` checked against hozon's commands. Line numbers in
    /// errors count from 1 in `text`.
    pub fn apply_text(&mut self, text: &[u8]) -> Result<(), ConfigError> {
        self.apply_text_with_commands(text, &CommandTable)
    }

    /// Parses a `redis-server`-style command line (without the program
    /// name): `[config-file | -] [--name value …]` (see
    /// [`Config::from_args_with_commands`]).
    pub fn from_args(args: &[String]) -> Result<Invocation, ConfigError> {
        Config::from_args_with_stdin(args, &mut std::io::stdin().lock())
    }

    /// [`Config::from_args`] reading `-` (configuration from standard
    /// input) from `stdin`.
    pub fn from_args_with_stdin(
        args: &[String],
        stdin: &mut dyn std::io::Read,
    ) -> Result<Invocation, ConfigError> {
        Config::from_args_with_commands(args, stdin, &CommandTable)
    }

    /// A configuration with persistence off and no data directory (`dir`
    /// empty): the engine reads and writes no file at all, a pure
    /// in-memory cache. SAVE, BGSAVE and BGREWRITEAOF are refused until a
    /// `dir` is set. Everything else has its default.
    pub fn in_memory() -> Config {
        Config {
            appendonly: false,
            save: Vec::new(),
            dir: PathBuf::new(),
            ..Config::default()
        }
    }
}

impl Engine {
    /// Opens an engine with `config`. With `appendonly yes` it locks the
    /// data directory, replays `appendonly.aof` (verifying every batch) and
    /// appends to it from then on; with persistence off it touches no file.
    pub fn open(config: Config) -> Result<Engine, crate::Error> {
        Engine::open_with_io(config, Arc::new(RealIo))
    }

    /// [`Engine::open`] with an explicit I/O backend (tests inject faults).
    pub fn open_with_io(config: Config, io: Arc<dyn Io>) -> Result<Engine, crate::Error> {
        let (mut engine, load) = Engine::begin_open_with_io(config, io)?;
        let loaded = load.run()?;
        engine.finish_open(loaded)?;
        Ok(engine)
    }

    /// The first half of [`Engine::open`], for a host that serves while
    /// the files load (the server answers -LOADING meanwhile): the data
    /// directory is locked and its stale temporary files removed, and the
    /// reading of the files the startup rule chose is returned as a
    /// [`StartupLoad`] to run on any thread. Until [`Engine::finish_open`]
    /// takes its result, the engine holds no data and refuses every command
    /// Redis refuses while loading (`-LOADING`), and INFO shows `loading:1`
    /// with the progress.
    pub fn begin_open(config: Config) -> Result<(Engine, StartupLoad), crate::Error> {
        Engine::begin_open_with_io(config, Arc::new(RealIo))
    }

    /// [`Engine::begin_open`] with an explicit I/O backend.
    pub fn begin_open_with_io(
        config: Config,
        io: Arc<dyn Io>,
    ) -> Result<(Engine, StartupLoad), crate::Error> {
        if config.databases == 0 {
            return Err(crate::Error::Config("databases must be at least 1".into()));
        }
        let mut engine = Engine::bare(config, Arc::clone(&io));
        engine
            .core
            .load_users_at_startup()
            .map_err(crate::Error::Config)?;
        let plan = engine.prepare_dir(io.as_ref())?;
        let mut scratch = Engine::bare(engine.core.config.clone(), io);
        let progress = SyncLoad::new(now_ms(), 0);
        scratch.load_counters = Some(Arc::clone(&progress.counters));
        engine.core.startup_load = Some(progress);
        Ok((engine, StartupLoad { scratch, plan }))
    }

    /// The second half of [`Engine::open`]: takes what the
    /// [`StartupLoad`] read, opens the AOF for appending (with `appendonly
    /// yes`) and sets the replication position the files recorded. Then
    /// the engine serves. As in Redis, a key WATCHed while loading is not
    /// touched by the load (nobody could read it before).
    pub fn finish_open(&mut self, loaded: LoadedFiles) -> Result<(), crate::Error> {
        let LoadedFiles { scratch, plan } = loaded;
        let mut scratch = *scratch;
        self.notices.append(&mut scratch.notices);
        std::mem::swap(&mut self.core.keyspace, &mut scratch.core.keyspace);
        let save = &scratch.core.save;
        self.core.save.last_load_keys = save.last_load_keys;
        self.core.save.last_load_expired = save.last_load_expired;
        if plan == Plan::Snapshot {
            self.core.save.last_save_ms = save.last_save_ms;
        }
        self.core.repl.loaded = scratch.core.repl.loaded.take();
        std::mem::swap(&mut self.core.functions, &mut scratch.core.functions);
        std::mem::swap(
            &mut self.core.function_engine,
            &mut scratch.core.function_engine,
        );
        self.core.aof_load = scratch.core.aof_load.take();
        drop(scratch);
        self.core.startup_load = None;
        let expired_at_load = if plan == Plan::Snapshot {
            self.expire_loaded_keys()
        } else {
            Vec::new()
        };
        if plan != Plan::NoDir && self.core.config.appendonly {
            // The initial AOF, when there was none, holds what was loaded:
            // it is opened for appending, never replayed on top of it.
            self.open_aof_writer()?;
        }
        // The position the loaded files recorded (the AOF's, else the
        // snapshot's): replicas of the previous run may continue.
        let position = match &self.core.aof_load {
            Some(report) => report.position,
            None => self.core.repl.loaded.take(),
        };
        let replicaof = self.core.config.replica.replicaof.clone();
        match (position, replicaof) {
            (position, Some((host, port))) => {
                self.core.become_replica(host, port);
                match position {
                    // A replica continues from what its files hold (D7).
                    Some(position) => self.core.resume_as_replica(position),
                    // Files without a position (or none): nothing to
                    // continue, `PSYNC ? -1` as a fresh Redis replica sends.
                    None => self.core.forget_cached_master(),
                }
            }
            (Some(position), None) => {
                let size = self.core.config.repl.backlog_size as usize;
                let line = self.core.repl.resume_from(&position, size);
                self.notices.push(line);
                // The keys the snapshot held past their TTL were deleted:
                // replicas continuing from its position get their DELs
                // from the backlog (Redis's rdbLoad feeds them to it).
                for (db, key) in expired_at_load {
                    self.core.repl.log_unit(&[crate::persist::aof::Effect {
                        db,
                        argv: vec![b"DEL".to_vec(), key.to_vec()],
                    }]);
                }
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// After a snapshot load: a master deletes the keys past their TTL
    /// (counted in `rdb_last_load_keys_expired`, not loaded) and returns
    /// them; a replica keeps them until its master's DELs, as Redis's do.
    fn expire_loaded_keys(&mut self) -> Vec<(usize, crate::types::Blob)> {
        if self.core.config.replica.replicaof.is_some() {
            return Vec::new();
        }
        let now = now_ms();
        let mut expired = Vec::new();
        for db in 0..self.core.keyspace.db_count() {
            for key in self.core.keyspace.db(db).expired_keys(now) {
                self.core.keyspace.db_mut(db).remove(&key);
                expired.push((db, key));
            }
        }
        let count = expired.len() as u64;
        let save = &mut self.core.save;
        save.last_load_expired += count;
        save.last_load_keys = save.last_load_keys.saturating_sub(count);
        expired
    }

    /// True until [`Engine::finish_open`] took the startup load's result.
    pub fn is_loading(&self) -> bool {
        self.core.startup_load.is_some()
    }

    /// An engine with an empty keyspace and no files open.
    pub(super) fn bare(config: Config, io: Arc<dyn Io>) -> Engine {
        let now = now_ms();
        Engine {
            group_commit: false,
            notices: Vec::new(),
            capture_effects: true,
            load_counters: None,
            core: Core {
                acl: {
                    crate::command::acl::install_table();
                    let mut users = crate::acl::Users::new();
                    users.set_default_password(config.requirepass.as_deref());
                    users
                },
                keyspace: Keyspace::new(config.databases).with_access_mode(
                    crate::core::evict::Policy::from_index(config.maxmemory_policy).is_lfu(),
                    now,
                ),
                config,
                stats: Stats::default(),
                observe: Default::default(),
                rng: Rng::new(),
                evict: Default::default(),
                effects: Vec::new(),
                dirty: 0,
                start_ms: now,
                loading: false,
                startup_load: None,
                aof: None,
                aof_load: None,
                clients: Default::default(),
                save: SaveState {
                    last_save_ms: now,
                    last_bgsave_ok: true,
                    last_bgsave_secs: -1,
                    ..SaveState::default()
                },
                rewrite: RewriteState::default(),
                scripting: Default::default(),
                functions: Default::default(),
                function_engine: Default::default(),
                script_run: Default::default(),
                io,
                dir_lock: None,
                next_session_id: 1,
                repl: crate::core::repl::ReplState::new(),
                repl_sync: None,
                last_cron_ms: now,
                wall: Default::default(),
                replica: Default::default(),
                replica_expires: Default::default(),
                pauses: Default::default(),
                failover: None,
                shutdown_deadline_ms: None,
                tracking: Default::default(),
                monitors: Default::default(),
                migrate_sockets: Default::default(),
                debug: Default::default(),
            },
        }
    }

    /// The part of the startup rule done before loading: with persistence
    /// configured (`appendonly yes` or save points) the directory is
    /// locked and `temp-*` files are removed; without a directory nothing
    /// is read. Returns what the load reads.
    fn prepare_dir(&mut self, io: &dyn Io) -> Result<Plan, crate::Error> {
        let dir = self.core.config.dir.clone();
        let appendonly = self.core.config.appendonly;
        let persistent = appendonly || !self.core.config.save.is_empty();
        if dir.as_os_str().is_empty() {
            if persistent {
                return Err(crate::Error::Config(
                    "dir is empty: appendonly yes and save points need a data directory".into(),
                ));
            }
            self.notices.push(
                "No data directory (dir is empty): starting with 0 keys; no file is read or written"
                    .into(),
            );
            return Ok(Plan::NoDir);
        }
        if persistent {
            if io.is_real() {
                self.core.dir_lock = Some(DirLock::acquire(&dir)?);
            }
            self.remove_temp_files(io, &dir)?;
        }
        let aof_path = dir.join(&self.core.config.appendfilename);
        Ok(if appendonly && io.exists(&aof_path) {
            Plan::Aof
        } else {
            Plan::Snapshot
        })
    }

    /// The startup rule (docs/persistence.md, "Startup"), run by
    /// [`StartupLoad::run`] on an engine nobody serves: with `appendonly
    /// yes`, the AOF if it exists, else a Redis 7 multi-part AOF
    /// (`appendonlydir/`) to import; otherwise (and with `appendonly no`)
    /// the snapshot if one exists (the file SAVE writes, then `dump.hoz`,
    /// then a Redis `dump.rdb`; the format is told by its magic). With
    /// `appendonly yes` and no AOF yet, the initial AOF is written from
    /// what was loaded. Every start logs what was loaded.
    fn load_files(&mut self, plan: Plan) -> Result<(), crate::Error> {
        let io = Arc::clone(&self.core.io);
        let appendonly = self.core.config.appendonly;
        match plan {
            Plan::NoDir => return Ok(()),
            Plan::Aof => return self.replay_aof_file(io.as_ref()),
            Plan::Snapshot => {}
        }
        let dir = self.core.config.dir.clone();
        let imported = appendonly && self.import_redis_aof_dir(io.as_ref())?;
        if !imported {
            match self.snapshot_to_load(io.as_ref()) {
                Some(path) => self.load_snapshot(io.as_ref(), &path)?,
                None => self.notices.push(format!(
                    "No data to load in {} (no {}{}): starting with 0 keys",
                    dir.display(),
                    if appendonly {
                        format!("{}, appendonlydir/, ", self.core.config.appendfilename)
                    } else {
                        String::new()
                    },
                    self.snapshot_candidates().join(", ")
                )),
            }
            if !appendonly {
                self.warn_unread_aofs(io.as_ref(), &dir);
            }
        }
        if appendonly && self.core.keyspace.total_keys() > 0 {
            self.core
                .write_initial_aof(now_ms())
                .map_err(crate::Error::Config)?;
        }
        Ok(())
    }

    /// Counts a file the load maps (INFO's `loading_total_bytes`).
    fn note_load_total(&self, bytes: usize) {
        if let Some(c) = &self.load_counters {
            c.total_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// What a load does after each key it inserts.
    fn key_pacer(&self) -> KeyPacer {
        KeyPacer {
            delay: self.core.config.key_load_delay,
            counters: self.load_counters.clone(),
            count: std::cell::Cell::new(0),
        }
    }

    /// The snapshot names looked for, in order: the file SAVE writes, the
    /// configured `dbfilename`, `dump.hoz`, `dump.rdb`.
    fn snapshot_candidates(&self) -> Vec<String> {
        let mut names = vec![
            self.core.snapshot_file_name(),
            self.core.config.dbfilename.clone(),
            "dump.hoz".to_string(),
            "dump.rdb".to_string(),
        ];
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }

    /// The first snapshot candidate present in the data directory.
    fn snapshot_to_load(&self, io: &dyn Io) -> Option<PathBuf> {
        self.snapshot_candidates()
            .iter()
            .map(|name| self.core.config.dir.join(name))
            .find(|path| io.exists(path))
    }

    /// With `appendonly no`, an AOF in the directory is not read (Redis's
    /// rule): say so, so that nobody wonders where its data went.
    fn warn_unread_aofs(&mut self, io: &dyn Io, dir: &std::path::Path) {
        let name = &self.core.config.appendfilename;
        for path in [
            dir.join(name),
            dir.join("appendonlydir").join(format!("{name}.manifest")),
        ] {
            if io.exists(&path) {
                self.notices.push(format!(
                    "!!! Warning: {} was not loaded because appendonly is no (Redis's rule: the \
                     snapshot is read, the AOF only with appendonly yes); start with appendonly yes \
                     to load it",
                    path.display()
                ));
            }
        }
    }

    /// Loads `dump.hoz` (every checksum verified, blocks decoded in
    /// parallel) or an RDB file. Damage refuses the start with the offset
    /// and what to do.
    fn load_snapshot(&mut self, io: &dyn Io, path: &std::path::Path) -> Result<(), crate::Error> {
        let started = std::time::Instant::now();
        let data = io.map(path).map_err(|source| crate::Error::Io {
            context: format!("reading {}", path.display()),
            source,
        })?;
        self.note_load_total(data.len());
        if crate::rdb::reader::is_rdb(&data) {
            // Keys past their TTL are kept for now: `finish_open` deletes
            // them (a master, telling its replicas) or keeps them (a
            // replica, until its master's DELs).
            let summary = self.load_rdb(&data, path, None)?;
            if summary.len != data.len() {
                let count = (data.len() - summary.len) as u64;
                return Err(corrupt(
                    path,
                    Some(summary.len as u64),
                    CorruptCause::TrailingBytes { count },
                    format!(
                        "cannot load the RDB file {}: {count} bytes follow its checksum at offset {}. Nothing was loaded and the file was not changed.",
                        path.display(),
                        summary.len
                    ),
                ));
            }
            self.core.save.last_load_keys = summary.keys;
            self.core.save.last_load_expired = summary.expired_skipped;
            self.core.repl.loaded = summary.position;
            self.notices.push(format!(
                "DB loaded from disk: {:.3} seconds ({} keys from the RDB file {}, version {}{})",
                started.elapsed().as_secs_f64(),
                summary.keys,
                path.display(),
                summary.version,
                if summary.valkey { ", Valkey" } else { "" }
            ));
            return Ok(());
        }
        // Keys past their TTL are kept for now (see the RDB case above).
        let options = crate::persist::snapshot::ReadOptions {
            workers: decode_workers(),
            limits: self.core.config.limits,
            now_ms: i64::MIN,
        };
        let pacer = self.key_pacer();
        let (summary, expired) = crate::persist::snapshot::load_into_reporting(
            &data,
            &mut self.core.keyspace,
            &options,
            &mut |announced| pacer.key(announced),
        )
        .map_err(|e| {
            let offset = e.offset();
            let at = offset.map_or_else(String::new, |n| format!(" (damage at offset {n})"));
            let text = format!(
                "cannot load the snapshot {}{at}: {e}. Nothing was loaded and the file was not changed.",
                path.display()
            );
            corrupt(path, offset, CorruptCause::Snapshot(e), text)
        })?;
        self.install_functions(path, summary.functions.clone())?;
        let loaded = summary.stats.keys.saturating_sub(expired);
        self.core.repl.loaded = summary.position;
        self.core.save.last_load_keys = loaded;
        self.core.save.last_load_expired = expired;
        self.core.save.last_save_ms = summary.created_ms;
        self.notices.push(format!(
            "DB loaded from disk: {:.3} seconds ({loaded} keys from {})",
            started.elapsed().as_secs_f64(),
            path.display()
        ));
        Ok(())
    }

    /// Reads an RDB image (a file, an AOF preamble, a Redis AOF base) into
    /// the keyspace; keys expired before `skip_expired_before_ms` are left
    /// out. Anything that cannot be loaded refuses the start; what was
    /// skipped is logged.
    fn load_rdb(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        skip_expired_before_ms: Option<i64>,
    ) -> Result<crate::rdb::reader::Summary, crate::Error> {
        let options = crate::rdb::reader::Options {
            limits: self.core.config.limits,
            databases: self.core.keyspace.db_count(),
            skip_expired_before_ms,
            now_ms: now_ms(),
        };
        let pacer = self.key_pacer();
        let lfu = self.core.policy().is_lfu();
        let now = crate::clock::now_ms();
        let keyspace = std::cell::RefCell::new(&mut self.core.keyspace);
        let summary = crate::rdb::reader::load_with_hints(
            data,
            &options,
            &mut |k| {
                keyspace
                    .borrow_mut()
                    .db_mut(k.db)
                    .insert_loaded(
                        k.key,
                        k.value,
                        k.expire_ms,
                        k.access.and_then(|a| a.field(lfu, now)),
                    )
                    .map_err(|_| "the key appears twice in the file".to_string())?;
                pacer.key(0);
                Ok(())
            },
            &mut |db, keys, expiring| {
                pacer.expect(keys);
                let mut keyspace = keyspace.borrow_mut();
                let db = keyspace.db_mut(db);
                if db.is_empty() {
                    db.reserve(keys as usize, expiring as usize);
                }
            },
        )
        .map_err(|e| {
            let text = format!(
                "cannot load the RDB file {}: {e}. Nothing was loaded and the file was not changed. \
                 Run `hozon-repair check {}` to see every problem, then `hozon-repair salvage {}` \
                 to see what a repair keeps (add --apply to write it).",
                path.display(),
                path.display(),
                path.display()
            );
            corrupt(path, Some(e.offset), CorruptCause::Rdb(e), text)
        })?;
        let codes = summary
            .functions
            .iter()
            .map(|c| c.as_bytes().to_vec())
            .collect();
        self.install_functions(path, codes)?;
        if summary.empty_skipped > 0 {
            // Redis 7.0 skips them too, with a log line (`hozon-inspect
            // info` reports them as empty_keys_skipped).
            self.notices.push(format!(
                "{} empty collections in {} were skipped (an empty key cannot exist)",
                summary.empty_skipped,
                path.display()
            ));
        }
        if !summary.modules_skipped.is_empty() {
            self.notices.push(format!(
                "!!! Warning: {} holds module data that was skipped ({}): hozon has no modules",
                path.display(),
                summary.modules_skipped.join(", ")
            ));
        }
        if summary.field_ttls_dropped > 0 {
            self.notices.push(format!(
                "!!! Warning: {} hash fields in {} had a TTL (HEXPIRE); hozon has no field expiry, so they were loaded without it",
                summary.field_ttls_dropped,
                path.display()
            ));
        }
        Ok(summary)
    }

    /// Imports a Redis 7 multi-part AOF (`appendonlydir/<appendfilename>.manifest`,
    /// a base `.rdb` or `.aof` and `incr` files, in manifest order) when
    /// the directory has one. Returns whether it did. The Redis files are
    /// only read; hozon then writes its own AOF.
    fn import_redis_aof_dir(&mut self, io: &dyn Io) -> Result<bool, crate::Error> {
        let aof_dir = self.core.config.dir.join("appendonlydir");
        let manifest_path = aof_dir.join(format!("{}.manifest", self.core.config.appendfilename));
        if !io.exists(&manifest_path) {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let text = io
            .read_all(&manifest_path)
            .map_err(|source| crate::Error::Io {
                context: format!("reading {}", manifest_path.display()),
                source,
            })?;
        let manifest = crate::persist::aof::parse_redis_manifest(&text).map_err(|e| {
            let text = format!(
                "cannot import the Redis AOF manifest {}: {e}",
                manifest_path.display()
            );
            corrupt(
                &manifest_path,
                None,
                CorruptCause::Manifest(e.to_string()),
                text,
            )
        })?;
        let count = manifest.len();
        for (i, (name, is_base)) in manifest.into_iter().enumerate() {
            let path = aof_dir.join(&name);
            let data = io.map(&path).map_err(|source| crate::Error::Io {
                context: format!(
                    "reading {} (listed in {})",
                    path.display(),
                    manifest_path.display()
                ),
                source,
            })?;
            self.note_load_total(data.len());
            if crate::rdb::reader::is_rdb(&data) && !is_base {
                let text = format!("{} is an incr file but holds an RDB image", path.display());
                return Err(corrupt(&path, Some(0), CorruptCause::RdbInIncrFile, text));
            }
            let report = self.load_aof_image(&data, &path, false)?;
            if let Some(torn) = &report.torn {
                let facts = format!(
                    "{} ends with a torn write at offset {} ({}): {} bytes and {} complete commands after it",
                    path.display(),
                    torn.valid_len,
                    torn.reason,
                    torn.dropped_bytes,
                    torn.dropped_commands
                );
                if i + 1 != count || !self.core.config.aof_load_truncated {
                    return Err(corrupt(
                        &path,
                        Some(torn.valid_len),
                        CorruptCause::TornTail(torn.clone()),
                        format!("cannot import the Redis AOF: {facts}"),
                    ));
                }
                self.notices.push(format!(
                    "!!! Warning: {facts}; they were not imported (the Redis file was not changed)"
                ));
            }
        }
        self.notices.push(format!(
            "Imported the Redis multi-part AOF {} ({} files, {} keys) in {:.3} seconds; hozon writes its own {} from now on",
            aof_dir.display(),
            count,
            self.core.keyspace.total_keys(),
            started.elapsed().as_secs_f64(),
            self.core.config.appendfilename
        ));
        Ok(true)
    }

    /// Replays the AOF (a torn tail is cut when `aof-load-truncated`).
    fn replay_aof_file(&mut self, io: &dyn Io) -> Result<(), crate::Error> {
        let path = self.core.config.dir.join(&self.core.config.appendfilename);
        {
            let started = std::time::Instant::now();
            let data = io.map(&path).map_err(|source| crate::Error::Io {
                context: format!("reading {}", path.display()),
                source,
            })?;
            self.note_load_total(data.len());
            let report = self.load_aof_image(&data, &path, false)?;
            // Unmap before the file is truncated or appended to.
            drop(data);
            if let Some(torn) = &report.torn {
                let facts = format!(
                    "the AOF {} ends with a torn write at offset {} ({}): {} bytes and {} complete commands after it",
                    path.display(),
                    torn.valid_len,
                    torn.reason,
                    torn.dropped_bytes,
                    torn.dropped_commands
                );
                if !self.core.config.aof_load_truncated {
                    let text = format!(
                        "{facts}; not loading because aof-load-truncated is no. \
                         Run `hozon-repair check {}` to see every problem, then `hozon-repair fix {} --apply` to cut \
                         the torn tail, or set aof-load-truncated yes to drop it on load",
                        path.display(),
                        path.display()
                    );
                    return Err(corrupt(
                        &path,
                        Some(torn.valid_len),
                        CorruptCause::TornTail(torn.clone()),
                        text,
                    ));
                }
                io.truncate(&path, torn.valid_len)
                    .map_err(|source| crate::Error::Io {
                        context: format!("truncating {} to {}", path.display(), torn.valid_len),
                        source,
                    })?;
                self.notices.push(format!(
                    "!!! Warning: {facts}; truncated the file to {} bytes and dropped them",
                    torn.valid_len
                ));
            }
            self.notices.push(format!(
                "DB loaded from append only file: {:.3} seconds ({} keys from {}: {} commands in {} verified batches)",
                started.elapsed().as_secs_f64(),
                self.core.keyspace.total_keys(),
                path.display(),
                report.commands,
                report.batches
            ));
            self.core.aof_load = Some(report);
        }
        Ok(())
    }

    /// Opens the AOF for appending (after the replay, or the initial AOF
    /// the load wrote; created empty when there was nothing to load).
    fn open_aof_writer(&mut self) -> Result<(), crate::Error> {
        let io = Arc::clone(&self.core.io);
        let path = self.core.config.dir.join(&self.core.config.appendfilename);
        let checksummed = self.core.aof_load.as_ref().is_none_or(|r| r.checksummed);
        let writer = AofWriter::open(
            Arc::clone(&io),
            &path,
            self.core.config.appendfsync,
            checksummed,
        )
        .map_err(|source| crate::Error::Io {
            context: format!("opening the append only file {}", path.display()),
            source,
        })?;
        self.core.aof = Some(writer);
        Ok(())
    }

    /// Reads an AOF image into the keyspace without touching any file: a
    /// log, or a log after the snapshot image a rewrite starts it with (a
    /// dump.hoz, or an RDB: ours with `aof-preamble rdb`, or Redis's base).
    /// The server uses it at startup; the inspector uses it (on an
    /// in-memory engine) to see the data an AOF holds. Keys of a dump.hoz
    /// preamble whose expiry has passed are left out unless
    /// `keep_expired`; an RDB preamble's are always kept, as Redis does.
    /// A torn tail is reported (`torn`, offsets from the start of `data`),
    /// not removed. Damage anywhere else is an error naming `path`.
    pub fn load_aof_image(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        keep_expired: bool,
    ) -> Result<LoadReport, crate::Error> {
        let preamble_len = if data.starts_with(&crate::persist::snapshot::MAGIC) {
            let now = if keep_expired { i64::MIN } else { now_ms() };
            self.load_aof_preamble(data, path, now)?
        } else if crate::rdb::reader::is_rdb(data) {
            self.load_rdb(data, path, None)?.len
        } else {
            0
        };
        let mut report = self.replay_aof(&data[preamble_len..], path, preamble_len)?;
        report.valid_len += preamble_len as u64;
        if let Some(torn) = report.torn.as_mut() {
            torn.valid_len += preamble_len as u64;
        }
        Ok(report)
    }

    /// Loads the snapshot image a rewritten AOF starts with, leaving out
    /// keys expired before `now_ms`; returns its length (where the log part
    /// starts). Damage there is corruption: the image was fsynced before
    /// the file got its name.
    fn load_aof_preamble(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        now_ms: i64,
    ) -> Result<usize, crate::Error> {
        use crate::persist::snapshot;
        let damaged = |e: snapshot::SnapshotError| {
            let text = format!(
                "Bad file format reading the append only file {}: its snapshot preamble is damaged: {e}. \
                 Nothing was loaded and the file was not changed. Run `hozon-repair check {}` to see every \
                 problem, then `hozon-repair salvage {}` to see what is kept and add --apply to write it.",
                path.display(),
                path.display(),
                path.display()
            );
            corrupt(path, e.offset(), CorruptCause::Snapshot(e), text)
        };
        let len = snapshot::image_len(data).map_err(damaged)?;
        let options = snapshot::ReadOptions {
            workers: decode_workers(),
            limits: self.core.config.limits,
            now_ms,
        };
        let pacer = self.key_pacer();
        let (summary, expired) = snapshot::load_into_reporting(
            &data[..len],
            &mut self.core.keyspace,
            &options,
            &mut |announced| pacer.key(announced),
        )
        .map_err(damaged)?;
        self.install_functions(path, summary.functions.clone())?;
        self.notices.push(format!(
            "Reading the snapshot preamble of the append only file: {} keys ({} expired, skipped)",
            summary.stats.keys.saturating_sub(expired),
            expired
        ));
        Ok(len)
    }

    /// Sets the function libraries a file recorded (none: nothing
    /// changes) and compiles them; a library that does not load refuses
    /// the start, as in Redis.
    fn install_functions(
        &mut self,
        path: &std::path::Path,
        codes: Vec<Vec<u8>>,
    ) -> Result<(), crate::Error> {
        if codes.is_empty() {
            return Ok(());
        }
        let count = codes.len();
        let unloadable = |e: String| {
            crate::Error::Unloadable(format!(
                "cannot load the function libraries of {}: {e}. Nothing was loaded and the file was not changed.",
                path.display()
            ))
        };
        self.core
            .functions
            .set_from_codes(codes)
            .map_err(unloadable)?;
        crate::script::functions::FunctionEngine::sync(
            &mut self.core.function_engine,
            &mut self.core.functions,
        )
        .map_err(unloadable)?;
        self.notices.push(format!(
            "Loaded {count} function libraries from {}",
            path.display()
        ));
        Ok(())
    }

    fn remove_temp_files(
        &mut self,
        io: &dyn Io,
        dir: &std::path::Path,
    ) -> Result<(), crate::Error> {
        let names = match io.list_dir(dir) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(crate::Error::Io {
                    context: format!("listing {}", dir.display()),
                    source,
                })
            }
        };
        for name in names.iter().filter(|n| n.starts_with("temp-")) {
            let path: PathBuf = dir.join(name);
            io.remove(&path).map_err(|source| crate::Error::Io {
                context: format!("removing stale temporary file {}", path.display()),
                source,
            })?;
            self.notices
                .push(format!("Removed stale temporary file {}", path.display()));
        }
        Ok(())
    }

    /// Replays an AOF image into the keyspace.
    fn replay_aof(
        &mut self,
        data: &[u8],
        path: &std::path::Path,
        base_offset: usize,
    ) -> Result<LoadReport, crate::Error> {
        let mut session = self.new_session();
        session.authenticated = true;
        self.core.loading = true;
        let pacer = self.key_pacer();
        let result = aof::replay_at(data, &mut |end, argv| {
            pacer.bytes((base_offset as u64) + end);
            if command::lookup(argv[0]).is_none() {
                return Err(format!(
                    "unknown command '{}'",
                    String::from_utf8_lossy(argv[0])
                ));
            }
            let reply = self.execute(&mut session, argv);
            self.core.effects.clear();
            match reply {
                Reply::Error(e) => Err(format!(
                    "replaying '{}' failed: {e}",
                    String::from_utf8_lossy(argv[0])
                )),
                _ => Ok(()),
            }
        });
        self.core.loading = false;
        result.map_err(|mut c| {
            c.offset += base_offset as u64;
            let text = format!(
                "Bad file format reading the append only file {} at offset {}: {}. Nothing was loaded and the file \
                 was not changed. Run `hozon-repair check {}` to see every problem, then `hozon-repair salvage {}` \
                 to see what is kept and add --apply to write it.",
                path.display(),
                c.offset,
                c.reason,
                path.display(),
                path.display()
            );
            corrupt(path, Some(c.offset), CorruptCause::Aof(c), text)
        })
    }
}

/// The error for a damaged `path`.
fn corrupt(
    path: &std::path::Path,
    offset: Option<u64>,
    cause: CorruptCause,
    text: String,
) -> crate::Error {
    crate::error::CorruptFile::new(path, offset, cause, text).into()
}

/// Threads decoding a snapshot besides the loading one, which inserts
/// (see `snapshot::ReadOptions::workers`): one per core.
fn decode_workers() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get() - 1)
}

/// What the startup load reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Plan {
    /// No data directory: nothing.
    NoDir,
    /// The AOF, which exists: replayed, then appended to.
    Aof,
    /// A Redis AOF directory to import (with `appendonly yes`), else the
    /// snapshot, if any.
    Snapshot,
}

/// The reading of the files at startup, which [`Engine::begin_open`]
/// leaves to the host: [`StartupLoad::run`] may run on any thread while
/// the engine serves what Redis serves while loading.
pub struct StartupLoad {
    /// The engine the files load into (nobody else sees it).
    scratch: Engine,
    plan: Plan,
}

impl StartupLoad {
    /// Reads the files (the startup rule; docs/persistence.md, "Startup")
    /// and, with `appendonly yes` and no AOF yet, writes the initial AOF
    /// from what was read. An error is what [`Engine::open`] would return;
    /// nothing was changed (a torn AOF tail is cut only with
    /// `aof-load-truncated yes`, as `open` does).
    pub fn run(mut self) -> Result<LoadedFiles, crate::Error> {
        self.scratch.load_files(self.plan)?;
        Ok(LoadedFiles {
            scratch: Box::new(self.scratch),
            plan: self.plan,
        })
    }
}

/// What a [`StartupLoad`] read, for [`Engine::finish_open`].
pub struct LoadedFiles {
    scratch: Box<Engine>,
    plan: Plan,
}

/// What a load does after each key (or AOF command) it applies: Redis's
/// `key-load-delay`, and the progress INFO reports while loading.
struct KeyPacer {
    delay: i32,
    counters: Option<Arc<LoadCounters>>,
    count: std::cell::Cell<u64>,
}

impl KeyPacer {
    /// Keys the load announces (an RDB's RESIZEDB hints).
    fn expect(&self, keys: u64) {
        if let Some(c) = &self.counters {
            c.keys_expected.fetch_add(keys, Ordering::Relaxed);
        }
    }

    /// A key was inserted; `announced` is the count a snapshot's footer
    /// gives (0: none, or told by [`KeyPacer::expect`]).
    fn key(&self, announced: u64) {
        self.count.set(self.count.get() + 1);
        if let Some(c) = &self.counters {
            if self.count.get() == 1 && announced > 0 {
                c.keys_expected.fetch_add(announced, Ordering::Relaxed);
            }
            c.keys_loaded.fetch_add(1, Ordering::Relaxed);
        }
        self.pause();
    }

    /// An AOF command was applied; `offset` is where it ends in the file.
    fn bytes(&self, offset: u64) {
        self.count.set(self.count.get() + 1);
        if let Some(c) = &self.counters {
            c.bytes_loaded.store(offset, Ordering::Relaxed);
        }
        self.pause();
    }

    fn pause(&self) {
        key_load_pause(self.delay, self.count.get());
    }
}

/// `key-load-delay` after the `count`th key of a load: Redis's
/// debugDelay, `delay` µs, or with a negative `-n`, 1 µs once in `n` keys.
pub(super) fn key_load_pause(delay: i32, count: u64) {
    let micros = match delay {
        0 => return,
        d if d > 0 => d as u64,
        d if count.is_multiple_of(u64::from(d.unsigned_abs())) => 1,
        _ => return,
    };
    std::thread::sleep(std::time::Duration::from_micros(micros));
}
