//! Reading the keys and values of any supported input: a dump.hoz, a
//! Redis/Valkey RDB file, an AOF (hozon's or Redis's, with or without a
//! preamble) or a Redis 7 AOF manifest / `appendonlydir`. `get`, `export`
//! and `diff` are built on [`Source::for_each`].
//!
//! Memory: dump.hoz and RDB inputs are streamed (a dump.hoz holds a few
//! decoded blocks and the value being stitched; an RDB the value being
//! read). An AOF is a log, so its keys exist only once it is replayed: it
//! is replayed into an in-memory engine (no file is touched), which holds
//! the data set the AOF describes.

use std::borrow::Cow;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use hozon::persist::{aof, snapshot};
use hozon::rdb::{self, reader};
use hozon::types::Value;
use hozon::{Config, Engine};

use crate::info::Input;
use crate::progress::Progress;

/// What an input is, found from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// hozon's native snapshot.
    Hoz,
    /// A Redis or Valkey RDB file.
    Rdb,
    /// An append-only file (any kind; may start with a preamble).
    Aof,
    /// A Redis 7 multi-part AOF, by its manifest.
    Manifest,
}

impl Format {
    /// The name reports use (as `info` prints it).
    pub fn name(self) -> &'static str {
        match self {
            Format::Hoz => "dump.hoz",
            Format::Rdb => "rdb",
            Format::Aof => "aof",
            Format::Manifest => "redis-aof-manifest",
        }
    }
}

/// Why reading stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The input is damaged (exit 1); the text says where.
    Damaged(String),
    /// Usage or I/O problem (exit 2).
    Io(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Damaged(m) | Failure::Io(m) => f.write_str(m),
        }
    }
}

/// One key of an input.
#[derive(Debug, Clone, Copy)]
pub struct KeyValue<'a> {
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a Value,
    /// Absolute expiry, Unix ms (kept even when it has passed).
    pub expire_ms: Option<i64>,
}

impl<'a> KeyValue<'a> {
    /// A key as the dump readers return it.
    fn of(k: &'a snapshot::LoadedKey) -> KeyValue<'a> {
        KeyValue {
            db: k.db,
            key: &k.key,
            value: &k.value,
            expire_ms: k.expire_ms,
        }
    }
}

/// The bytes of an input: a mapped file, or what stdin held.
enum Bytes {
    Mapped(Input),
    Owned(Vec<u8>),
}

impl Bytes {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::Mapped(input) => input.bytes(),
            Bytes::Owned(v) => v,
        }
    }
}

/// Gives back the pages a walk has passed, in steps, so that the walk's
/// resident set stays small however large the mapped file is.
pub struct Releaser<'a> {
    bytes: &'a Bytes,
    /// Everything before this was given back.
    done: usize,
}

impl Releaser<'_> {
    /// Pages are given back this far behind the walk (blocks decoded
    /// ahead, a running CRC and the current record may still use them).
    const LAG: usize = 8 << 20;
    /// ... and in steps of this size.
    const STEP: usize = 32 << 20;

    fn new(bytes: &Bytes) -> Releaser<'_> {
        Releaser { bytes, done: 0 }
    }

    /// The walk has reached `pos`.
    pub fn reached(&mut self, pos: u64) {
        let Bytes::Mapped(input) = self.bytes else {
            return;
        };
        let upto = (pos as usize).saturating_sub(Self::LAG);
        if upto >= self.done + Self::STEP {
            input.release(self.done, upto);
            self.done = upto;
        }
    }
}

/// An opened input.
pub struct Source {
    /// The name to print (the path, or `-`).
    name: String,
    bytes: Bytes,
    format: Format,
    /// For a manifest: the directory its files are in.
    dir: PathBuf,
}

/// Databases of the engine an AOF is replayed into: any `SELECT` a
/// server could have written must be accepted (Redis allows any count).
const AOF_DATABASES: usize = 1024;

/// Opens `path` (`-`: all of stdin, which must then hold a single file,
/// not a manifest) and finds its format from the content. A directory is
/// a Redis 7 `appendonlydir` (or the directory holding one).
pub fn open(path: &Path) -> Result<Source, Failure> {
    if path.as_os_str() == "-" {
        let mut data = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut data)
            .map_err(|e| Failure::Io(format!("reading stdin: {e}")))?;
        let format = detect(&data)?;
        if format == Format::Manifest {
            return Err(Failure::Io(
                "stdin holds an AOF manifest; name the file or its directory instead".into(),
            ));
        }
        return Ok(Source {
            name: "-".into(),
            bytes: Bytes::Owned(data),
            format,
            dir: PathBuf::from("."),
        });
    }
    let meta =
        std::fs::metadata(path).map_err(|e| Failure::Io(format!("{}: {e}", path.display())))?;
    let file = if meta.is_dir() {
        hozon::tools::manifest::find_manifest(path).map_err(Failure::Io)?
    } else {
        path.to_path_buf()
    };
    let input = Input::open(&file).map_err(Failure::Io)?;
    let format = detect(input.bytes())?;
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    Ok(Source {
        name: path.display().to_string(),
        bytes: Bytes::Mapped(input),
        format,
        dir,
    })
}

/// The format of `data`, from its first bytes.
fn detect(data: &[u8]) -> Result<Format, Failure> {
    if data.starts_with(&snapshot::MAGIC) {
        // A snapshot followed by log data is an AOF with a native preamble.
        return Ok(match snapshot::image_len(data) {
            Ok(len) if len < data.len() => Format::Aof,
            _ => Format::Hoz,
        });
    }
    if reader::is_rdb(data) {
        // An RDB file ends with the EOF opcode and 8 checksum bytes; an AOF
        // with an RDB preamble ends with its log's CRLF. Only when the end
        // does not say which is the image walked to find where it ends.
        let ends_as_rdb = data.len() >= 9 && data[data.len() - 9] == 0xff;
        if ends_as_rdb && !data.ends_with(b"\r\n") {
            return Ok(Format::Rdb);
        }
        return Ok(match reader::scan(data) {
            Ok(s) if s.len < data.len() && crate::info::looks_like_aof(&data[s.len..]) => {
                Format::Aof
            }
            _ => Format::Rdb,
        });
    }
    if hozon::tools::manifest::looks_like_manifest(data) {
        return Ok(Format::Manifest);
    }
    if crate::info::looks_like_aof(data) {
        return Ok(Format::Aof);
    }
    Err(Failure::Damaged(
        "not a dump.hoz, RDB, AOF or AOF manifest (unrecognised content at offset 0)".into(),
    ))
}

impl Source {
    /// The input's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The name the input was opened by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The input's bytes (mapped, or read from stdin).
    pub fn data(&self) -> &[u8] {
        self.bytes.get()
    }

    /// A [`Releaser`] of the input's pages, for a walk of [`Source::data`]
    /// done outside this module.
    pub fn releaser(&self) -> Releaser<'_> {
        Releaser::new(&self.bytes)
    }

    /// Hands every key to `f`, in file order (an AOF's: database by
    /// database, in table order, once replayed), until `f` breaks. Keys
    /// whose expiry has passed are included, with it. Damage stops the walk
    /// with [`Failure::Damaged`] after the keys before it were handed on
    /// (for an AOF: the data set as of the last command before it).
    pub fn for_each(
        &self,
        f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>,
    ) -> Result<(), Failure> {
        let data = self.bytes.get();
        match self.format {
            Format::Hoz => for_each_hoz(data, f),
            Format::Rdb => for_each_rdb(data, f),
            Format::Aof => {
                let mut engine = aof_engine()?;
                let replaying = Progress::spinner(data.len() as u64, "replaying the AOF");
                let loaded = load_aof_file(&mut engine, data, Path::new(&self.name));
                drop(replaying);
                for_each_engine(&mut engine, f);
                loaded
            }
            Format::Manifest => {
                let mut engine = aof_engine()?;
                let entries = aof::parse_redis_manifest(data)
                    .map_err(|e| Failure::Damaged(format!("{}: {e}", self.name)))?;
                let mut loaded = Ok(());
                let replaying = Progress::spinner(u64::MAX, "replaying the AOF files");
                for (name, _) in entries {
                    let path = self.dir.join(&name);
                    let input = Input::open(&path).map_err(Failure::Io)?;
                    loaded = load_aof_file(&mut engine, input.bytes(), &path);
                    if loaded.is_err() {
                        break;
                    }
                }
                drop(replaying);
                for_each_engine(&mut engine, f);
                loaded
            }
        }
    }
}

/// Threads decoding a snapshot besides the reading one (see
/// `snapshot::ReadOptions::workers`): one per core.
fn decode_workers() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get() - 1)
}

fn for_each_hoz(
    data: &[u8],
    f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>,
) -> Result<(), Failure> {
    let read = snapshot::ReadOptions {
        workers: decode_workers(),
        limits: Config::default().limits,
        now_ms: i64::MIN,
    };
    let mut stopped = false;
    let total = snapshot::read_summary(data).map_or(0, |s| s.stats.keys);
    let progress = Progress::keys(total, data.len() as u64, "reading");
    let result = snapshot::load_streaming(data, &read, |keys| {
        progress.inc(keys.len() as u64);
        for k in &keys {
            if f(KeyValue::of(k)).is_break() {
                stopped = true;
                // Any error ends the load; this one is not reported.
                return Err(snapshot::SnapshotError::Mismatch("stopped".into()));
            }
        }
        Ok(())
    });
    match result {
        Ok(_) => Ok(()),
        Err(_) if stopped => Ok(()),
        Err(e) => Err(Failure::Damaged(hoz_damage(&e))),
    }
}

/// A snapshot error as the tools print it: with its offset first when
/// the error knows it (as hozon-server's message has it).
fn hoz_damage(e: &snapshot::SnapshotError) -> String {
    match e.offset() {
        Some(at) => format!("at offset {at}: {e}"),
        None => e.to_string(),
    }
}

fn for_each_rdb(
    data: &[u8],
    f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>,
) -> Result<(), Failure> {
    let now = hozon::engine::now_ms();
    let options = reader::Options {
        limits: Config::default().limits,
        databases: reader::MAX_DATABASES,
        skip_expired_before_ms: None,
        now_ms: now,
    };
    let mut stopped = false;
    let mut seen = KeysSeen::default();
    // The RDB reader does not say where it is: elapsed time only.
    let _progress = Progress::spinner(data.len() as u64, "reading");
    let result = reader::load(data, &options, &mut |k| {
        if stopped {
            return Ok(());
        }
        // A server loading the file refuses a key stored twice (among
        // the keys it keeps: an expired one is dropped first).
        if k.expire_ms.is_none_or(|at| at >= now) && !seen.insert(k.db, &k.key) {
            return Err("the key appears twice in the file".into());
        }
        if f(KeyValue::of(&k)).is_break() {
            stopped = true;
            return Err("stopped".into());
        }
        Ok(())
    });
    match result {
        Ok(_) if stopped => Ok(()),
        Ok(s) if s.len < data.len() => Err(Failure::Damaged(format!(
            "at offset {}: {} bytes after the end of the RDB image",
            s.len,
            data.len() - s.len
        ))),
        Ok(_) => Ok(()),
        Err(_) if stopped => Ok(()),
        Err(e) => Err(Failure::Damaged(e.to_string())),
    }
}

/// The keys of a walk, as 128-bit fingerprints of (db, key): finds a key
/// stored twice without keeping the keys (16 bytes a key).
#[derive(Default)]
pub struct KeysSeen(std::collections::HashSet<u128, foldhash::fast::RandomState>);

impl KeysSeen {
    /// False when (db, key) was inserted before.
    pub fn insert(&mut self, db: usize, key: &[u8]) -> bool {
        use std::hash::BuildHasher;
        let a = foldhash::fast::FixedState::with_seed(0x6b65_7931).hash_one((db, key));
        let b = foldhash::fast::FixedState::with_seed(0x6b65_7932).hash_one((key, db));
        self.0.insert((u128::from(a) << 64) | u128::from(b))
    }
}

/// An in-memory engine (it touches no file) to replay AOFs into.
fn aof_engine() -> Result<Engine, Failure> {
    let config = Config {
        databases: AOF_DATABASES,
        ..Config::in_memory()
    };
    Engine::open(config).map_err(|e| Failure::Io(e.to_string()))
}

/// Replays one AOF file (with its preamble, if any) into `engine`. A torn
/// tail is damage: the data before it has been loaded.
fn load_aof_file(engine: &mut Engine, data: &[u8], path: &Path) -> Result<(), Failure> {
    let report = engine
        .load_aof_image(data, path, true)
        .map_err(|e| Failure::Damaged(e.to_string()))?;
    match report.torn {
        Some(torn) => Err(Failure::Damaged(format!(
            "{} ends with a torn write at offset {} ({})",
            path.display(),
            torn.valid_len,
            torn.reason
        ))),
        None => Ok(()),
    }
}

fn for_each_engine(engine: &mut Engine, f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>) {
    let keyspace = engine.keyspace();
    for db_index in 0..keyspace.db_count() {
        let db = keyspace.db(db_index);
        for (key, value) in db.iter() {
            let kv = KeyValue {
                db: db_index,
                key,
                value,
                expire_ms: db.expire_at(key),
            };
            if f(kv).is_break() {
                return;
            }
        }
    }
}

/// What `keys` and `memory` know of a key without its value being kept.
#[derive(Debug, Clone)]
pub struct KeyFacts<'a> {
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: &'a [u8],
    /// What TYPE reports.
    pub logical_type: &'static str,
    /// RDB: the record's type byte name (`hash_listpack`, ...); dump.hoz
    /// and AOF: what OBJECT ENCODING reports once loaded.
    pub encoding: Cow<'a, str>,
    /// RDB: offset of the record's type byte; dump.hoz: offset of the
    /// block holding the key (its first part); AOF: none.
    pub offset: Option<u64>,
    /// RDB: record bytes (type byte, key, value); dump.hoz: bytes of its
    /// records in the decompressed blocks; AOF: what the key would take as
    /// an RDB record without LZF compression.
    pub bytes: u64,
    /// Elements (list items, hash fields, set/zset members, stream
    /// entries) when known without building the value (RDB: when the
    /// encoding states them up front; always for dump.hoz and AOF);
    /// strings have none.
    pub elements: Option<u64>,
    /// Absolute expiry, Unix ms.
    pub expire_ms: Option<i64>,
}

/// Why [`Source::for_each_facts`] stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactsError {
    /// The input is damaged (exit 1), at this offset when it is known.
    Damaged(Option<u64>, String),
    /// Usage or I/O problem (exit 2).
    Io(String),
}

impl From<Failure> for FactsError {
    fn from(f: Failure) -> FactsError {
        match f {
            Failure::Damaged(m) => FactsError::Damaged(None, m),
            Failure::Io(m) => FactsError::Io(m),
        }
    }
}

impl Source {
    /// Hands the facts of every key to `f`, in file order, until `f`
    /// breaks: RDB and dump.hoz inputs are walked without keeping values
    /// (memory: a few blocks, or the RDB record being skipped); an AOF is
    /// replayed first (see the module docs). Damage stops the walk after
    /// the keys before it were handed on; a wrong RDB checksum or bytes
    /// after an RDB image are damage found at the end.
    pub fn for_each_facts(
        &self,
        f: &mut dyn FnMut(&KeyFacts<'_>) -> ControlFlow<()>,
    ) -> Result<(), FactsError> {
        let data = self.bytes.get();
        match self.format {
            Format::Rdb => {
                let mut stopped = false;
                let progress = Progress::bytes(data.len() as u64, "reading");
                let mut releaser = Releaser::new(&self.bytes);
                // Every value checked as the server's loader reads it.
                let result = reader::check_keys(data, &crate::info::check_options(), &mut |k| {
                    progress.set(k.offset);
                    releaser.reached(k.offset);
                    let facts = KeyFacts {
                        db: k.db,
                        key: &k.key,
                        logical_type: k.logical_type,
                        encoding: rdb::kind::name(k.type_byte).map_or_else(
                            || Cow::Owned(format!("type {}", k.type_byte)),
                            Cow::Borrowed,
                        ),
                        offset: Some(k.offset),
                        bytes: k.record_bytes,
                        elements: k.elements,
                        expire_ms: k.expire_ms,
                    };
                    let flow = f(&facts);
                    stopped |= flow.is_break();
                    flow
                });
                match result {
                    Err(e) => Err(FactsError::Damaged(Some(e.offset), e.to_string())),
                    Ok(_) if stopped => Ok(()),
                    Ok(s) if s.len < data.len() => Err(FactsError::Damaged(
                        Some(s.len as u64),
                        format!(
                            "at offset {}: {} bytes after the end of the RDB image",
                            s.len,
                            data.len() - s.len
                        ),
                    )),
                    Ok(_) => Ok(()),
                }
            }
            Format::Hoz => {
                let read = snapshot::ReadOptions {
                    workers: decode_workers(),
                    ..snapshot::ReadOptions::default()
                };
                let mut block_offsets: Option<Vec<u64>> = None;
                let progress = Progress::bytes(data.len() as u64, "reading");
                let mut releaser = Releaser::new(&self.bytes);
                let result = snapshot::scan_keys(data, &read, &mut |k| {
                    let offsets = block_offsets.get_or_insert_with(|| {
                        snapshot::read_summary(data)
                            .map(|s| s.blocks.iter().map(|b| b.offset).collect())
                            .unwrap_or_default()
                    });
                    if let Some(&at) = offsets.get(k.block as usize) {
                        progress.set(at);
                        releaser.reached(at);
                    }
                    let facts = KeyFacts {
                        db: k.db,
                        key: &k.key,
                        logical_type: k.value_type.name(),
                        encoding: Cow::Borrowed(k.encoding),
                        offset: offsets.get(k.block as usize).copied(),
                        bytes: k.bytes,
                        elements: (k.value_type != snapshot::ValueType::String)
                            .then_some(k.elements),
                        expire_ms: k.expire_ms,
                    };
                    f(&facts)
                });
                result.map(|_| ()).map_err(|e| {
                    FactsError::Damaged(Some(crate::info::snapshot_offset(&e)), hoz_damage(&e))
                })
            }
            Format::Aof | Format::Manifest => {
                // Uncompressed: sizes that say how big the data is, not
                // how well it compresses.
                let encoder = rdb::writer::Encoder {
                    compress: false,
                    ..rdb::writer::Encoder::default()
                };
                let mut record = Vec::new();
                self.for_each(&mut |kv| {
                    record.clear();
                    encoder.put_key(&mut record, kv.key, kv.value, None);
                    let facts = KeyFacts {
                        db: kv.db,
                        key: kv.key,
                        logical_type: kv.value.type_name(),
                        encoding: Cow::Borrowed(kv.value.encoding()),
                        offset: None,
                        bytes: record.len() as u64,
                        elements: (!matches!(kv.value, Value::Str(_)))
                            .then(|| kv.value.length() as u64),
                        expire_ms: kv.expire_ms,
                    };
                    f(&facts)
                })
                .map_err(FactsError::from)
            }
        }
    }
}
