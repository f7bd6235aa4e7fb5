//! Point-in-time capture of the keyspace while clients keep writing (for
//! BGSAVE and the AOF rewrite), without `fork()`.
//!
//! # Why not fork, and why not copy-on-write values
//!
//! `fork()` is what Redis does, but it is unsafe in a library embedded in a
//! multi-threaded host (only the forking thread survives in the child, with
//! whatever locks the others held). `Arc` values with `make_mut`, or a
//! persistent map, would tax every command for the rare snapshot. So this is
//! *versioned iteration* (what Dragonfly does): a cursor walks each
//! database's hash table while commands keep running, and a write that is
//! about to change a key the cursor has not reached yet first saves the
//! key's old state (its *pre-image*).
//!
//! # The mechanism
//!
//! * [`Keyspace::begin_capture`] gives every non-empty database a cursor
//!   over the *positions* of its main table: the buckets of both tables of
//!   the [`Dict`](super::dict::Dict) (both exist while an incremental resize
//!   is under way), in a fixed order. For the positions to stay put,
//!   resizing and incremental rehashing of the main table are paused until
//!   the database's cursor has finished: a removal unlinks in place, an
//!   insert goes into an existing bucket. (The expires table is never walked,
//!   only read, so it keeps resizing.)
//! * Every mutating [`Db`] method first checks one thing: is a capture
//!   running. If so, and the cursor has not finished, the hook looks at the
//!   key's position:
//!   - the key is present at a position the cursor has not visited yet and
//!     is not in the *skip list* of that position: it existed when the
//!     capture began and has not changed since (any change would have put it
//!     in the skip list), so its pre-image (key, value, absolute expiry) is
//!     cloned into the database's *early records* and the key is added to
//!     the skip list of its position;
//!   - the key is absent and an insert would put it at an unvisited
//!     position: it is added to that position's skip list, since it did not
//!     exist when the capture began;
//!   - otherwise (visited position, or already in the skip list) nothing.
//!
//!   When the cursor visits a position it emits every key there that is not
//!   in the position's skip list, with its current value and expiry, which
//!   are the ones it had at the start (see above), then forgets the skip
//!   list of that position. So the bookkeeping is O(keys touched during the
//!   capture at positions not yet visited), never O(keys).
//! * [`Keyspace::capture_step`] emits the early records first, then advances
//!   the cursors database by database. Over the whole capture it emits
//!   exactly the keyspace as it was at `begin_capture`: every key once, with
//!   the value and absolute expiry it had then (keys already past their TTL
//!   but not yet deleted included: the saver decides what to do with them).
//! * **Load-factor escape hatch.** With resizing paused, a database that
//!   keeps receiving new keys gets longer and longer chains. When one more
//!   insert would take the main table past
//!   [`FORCE_RESIZE_RATIO`] elements per bucket (Redis's
//!   `dict_force_resize_ratio`, the same limit Redis applies while a fork
//!   child runs), all the records of that database the cursor has not
//!   reached yet are cloned into its early records at once and its cursor
//!   finishes, so the table can resize. That one write stalls for a time
//!   proportional to what was left unvisited in that database.
//! * **Whole-database operations.** The capture state of a database lives
//!   inside the [`Db`] (with the index the database had at the start), so
//!   SWAPDB (`Db::swap`) needs nothing special. A capturing `Db` that is
//!   cleared ([`Db::clear`]) or dropped (FLUSHDB's
//!   `std::mem::take(keyspace.db_mut(i))` followed by dropping the taken
//!   database) hands its tables, unchanged, to the capture in O(1): they
//!   become a *retired source*, drained by later steps (freeing its memory
//!   bucket by bucket as it goes). A `Db` taken out of the keyspace and kept
//!   alive elsewhere keeps the capture from finishing until it is dropped or
//!   put back: `capture_step` never reports completion while records may be
//!   missing.
//! * Cost while no capture runs: one branch on an `Option` per mutating
//!   call (measured in the tests: within noise).
//! * Cost while a capture runs: an extra hash and bucket walk per write, and
//!   a clone of the value the first time a not-yet-visited key is written
//!   (a big collection is cloned whole, once).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::dict::Dict;
use super::{Db, Keyspace};
use crate::types::{Blob, Value};

/// Elements per bucket beyond which a paused main table is allowed to
/// resize anyway (Redis's `dict_force_resize_ratio`).
pub const FORCE_RESIZE_RATIO: usize = 5;

/// Positions a step may visit per record it may emit, so a step over a
/// sparse table (many emptied buckets: shrinking is paused) stays bounded.
const POSITIONS_PER_RECORD: usize = 8;

/// A record saved before the cursor reached it.
struct Record {
    key: Blob,
    value: Value,
    expire_at_ms: Option<i64>,
}

/// Keys that must not be emitted when the cursor reaches their position:
/// position → keys (usually one). Only positions not yet visited are kept,
/// so the cursor always finds its position's list first. A B-tree rather
/// than a hash map: it never rehashes everything at once, which under a
/// burst of writes would be a pause of its own.
type SkipLists = BTreeMap<usize, Vec<Blob>>;

/// What the capture knows about one database (lives in the [`Db`]).
pub(super) struct DbCapture {
    /// The capture this belongs to; `None` once retired (a retired source
    /// is owned by the capture itself).
    shared: Option<Arc<Shared>>,
    /// Index of the database when the capture began (what records carry).
    origin: usize,
    /// Next position of the main table the cursor visits.
    next_position: usize,
    /// Number of positions of the main table (fixed while paused).
    end_position: usize,
    skip: SkipLists,
    early: Vec<Record>,
}

impl std::fmt::Debug for DbCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbCapture")
            .field("origin", &self.origin)
            .field("next_position", &self.next_position)
            .field("end_position", &self.end_position)
            .field("skip_positions", &self.skip.len())
            .field("early_records", &self.early.len())
            .finish()
    }
}

impl DbCapture {
    fn cursor_done(&self) -> bool {
        self.next_position >= self.end_position
    }

    fn is_skipped(&self, position: usize, key: &[u8]) -> bool {
        self.skip
            .get(&position)
            .is_some_and(|keys| keys.iter().any(|k| k.as_bytes() == key))
    }

    fn skip_key(&mut self, position: usize, key: Blob) {
        self.skip.entry(position).or_default().push(key);
    }

    fn belongs_to(&self, shared: &Arc<Shared>) -> bool {
        self.shared.as_ref().is_some_and(|s| Arc::ptr_eq(s, shared))
    }

    fn is_live(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.active.load(Ordering::Relaxed))
    }
}

/// A database's tables taken over by the capture (cleared or dropped while
/// captured), drained by later steps.
struct Retired {
    main: Dict<Blob, Value>,
    expires: Dict<Blob, i64>,
    capture: Box<DbCapture>,
}

/// State shared between the keyspace's capture and every database's part
/// of it, including databases taken out of the keyspace.
struct Shared {
    /// False once the capture ended (finished or aborted): a database still
    /// holding a part of it then just drops that part.
    active: AtomicBool,
    /// Sources retired by databases that were dropped (possibly outside
    /// the keyspace), waiting to be adopted by the next step. A `Mutex`
    /// because the engine is `Send`: a dropped database may in principle be
    /// dropped on another thread.
    retired: Mutex<Vec<Retired>>,
}

impl Shared {
    fn retired(&self) -> std::sync::MutexGuard<'_, Vec<Retired>> {
        // A panic while the lock was held cannot leave the vector half
        // updated (push and drain are the only operations): keep going.
        self.retired.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The keyspace's side of a running capture.
pub(super) struct KeyspaceCapture {
    shared: Arc<Shared>,
    /// Retired sources adopted from `shared`, drained in order.
    retired: Vec<Retired>,
}

impl std::fmt::Debug for KeyspaceCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceCapture")
            .field("retired_sources", &self.retired.len())
            .finish()
    }
}

/// How much a step may still do.
struct Budget {
    records: usize,
    positions: usize,
}

impl Budget {
    fn new(max_records: usize) -> Budget {
        let records = max_records.max(1);
        Budget {
            records,
            positions: records.saturating_mul(POSITIONS_PER_RECORD),
        }
    }

    fn exhausted(&self) -> bool {
        self.records == 0 || self.positions == 0
    }

    fn emitted(&mut self) {
        self.records = self.records.saturating_sub(1);
    }

    fn visited(&mut self) {
        self.positions = self.positions.saturating_sub(1);
    }
}

/// What a capture emits records to: (database index at capture start, key,
/// value, absolute expiry in Unix ms).
pub type CaptureSink<'a> = dyn FnMut(usize, &Blob, &Value, Option<i64>) + 'a;

/// Emits early records until the budget runs out.
fn drain_early(capture: &mut DbCapture, budget: &mut Budget, sink: &mut CaptureSink<'_>) {
    while !budget.exhausted() {
        let Some(record) = capture.early.pop() else {
            // Give the memory back: early records can pile up under a
            // burst of writes.
            capture.early = Vec::new();
            return;
        };
        sink(
            capture.origin,
            &record.key,
            &record.value,
            record.expire_at_ms,
        );
        budget.emitted();
    }
}

/// The skip list of the position the cursor is visiting, removed (no
/// list is kept for a position before it, so it can only be the first).
fn take_skip_list(skip: &mut SkipLists, position: usize) -> Option<Vec<Blob>> {
    debug_assert!(
        skip.first_key_value()
            .is_none_or(|(&first, _)| first >= position),
        "no skip list is kept for a visited position"
    );
    match skip.first_key_value() {
        Some((&first, _)) if first == position => skip.pop_first().map(|(_, keys)| keys),
        _ => None,
    }
}

/// Advances the cursor of a database still in use.
fn advance_live(
    main: &Dict<Blob, Value>,
    expires: &Dict<Blob, i64>,
    capture: &mut DbCapture,
    budget: &mut Budget,
    sink: &mut CaptureSink<'_>,
) {
    while !capture.cursor_done() && !budget.exhausted() {
        let position = capture.next_position;
        let skip = take_skip_list(&mut capture.skip, position);
        main.visit_position(position, |key, value| {
            if skip
                .as_ref()
                .is_some_and(|keys| keys.iter().any(|k| k == key))
            {
                return;
            }
            sink(capture.origin, key, value, expires.get(key).copied());
            budget.emitted();
        });
        budget.visited();
        capture.next_position += 1;
    }
}

/// Advances the cursor of a retired source, moving records out (its memory
/// is freed as it goes).
fn advance_retired(retired: &mut Retired, budget: &mut Budget, sink: &mut CaptureSink<'_>) {
    let Retired {
        main,
        expires,
        capture,
    } = retired;
    while !capture.cursor_done() && !budget.exhausted() {
        let position = capture.next_position;
        let skip = take_skip_list(&mut capture.skip, position);
        main.drain_position(position, |key, value| {
            if skip.as_ref().is_some_and(|keys| keys.contains(&key)) {
                return;
            }
            let expire_at_ms = expires.remove(key.as_bytes()).map(|(_, at)| at);
            sink(capture.origin, &key, &value, expire_at_ms);
            budget.emitted();
        });
        budget.visited();
        capture.next_position += 1;
    }
}

impl Db {
    /// Capture hook before `key` is changed or removed (no insert).
    #[cold]
    #[inline(never)]
    pub(super) fn capture_before_change(&mut self, key: &[u8]) {
        if !self.capture_in_progress() {
            return;
        }
        let Db {
            main,
            expires,
            capture,
        } = self;
        let capture = capture.as_mut().expect("capture_in_progress checked it");
        if let Some((position, stored_key, value)) = main.locate(key) {
            save_pre_image(capture, position, stored_key, value, expires);
        }
    }

    /// Capture hook before a write that may insert `key` (SET, inserts).
    #[cold]
    #[inline(never)]
    pub(super) fn capture_before_write(&mut self, key: &[u8]) {
        if !self.capture_in_progress() {
            return;
        }
        if let Some((position, stored_key, value)) = self.main.locate(key) {
            let capture = self
                .capture
                .as_mut()
                .expect("capture_in_progress checked it");
            save_pre_image(capture, position, stored_key, value, &self.expires);
            return;
        }
        if self.main.insert_would_overload(FORCE_RESIZE_RATIO) {
            self.capture_force_resize();
            return;
        }
        let position = self.main.insert_position(key);
        let capture = self
            .capture
            .as_mut()
            .expect("capture_in_progress checked it");
        if position >= capture.next_position && !capture.is_skipped(position, key) {
            // Created after the start: not part of the capture.
            capture.skip_key(position, Blob::new(key));
        }
    }

    /// True when this database's cursor still runs for a live capture;
    /// drops the part of a capture that has ended.
    fn capture_in_progress(&mut self) -> bool {
        let Some(capture) = &self.capture else {
            return false;
        };
        if !capture.is_live() {
            self.capture = None;
            self.main.set_resize_paused(false);
            return false;
        }
        !capture.cursor_done()
    }

    /// The load-factor escape hatch: saves every record the cursor has not
    /// reached as an early record, finishes the cursor and lets the main
    /// table resize.
    fn capture_force_resize(&mut self) {
        let Db {
            main,
            expires,
            capture,
        } = self;
        let capture = capture.as_mut().expect("called while capturing");
        let mut early = std::mem::take(&mut capture.early);
        // Walked alongside the positions (both in order) rather than looked
        // up per position.
        let mut skips = capture.skip.range(capture.next_position..).peekable();
        for position in capture.next_position..capture.end_position {
            let skip = skips.next_if(|(&p, _)| p == position).map(|(_, keys)| keys);
            main.visit_position(position, |key, value| {
                if skip.is_some_and(|keys| keys.iter().any(|k| k == key)) {
                    return;
                }
                early.push(Record {
                    key: key.clone(),
                    value: value.clone(),
                    expire_at_ms: expires.get(key).copied(),
                });
            });
        }
        capture.early = early;
        capture.skip = SkipLists::default();
        capture.next_position = capture.end_position;
        main.set_resize_paused(false);
    }

    /// Hands what the capture still needs from this database over to the
    /// capture (before the database is cleared or dropped), in O(1).
    pub(super) fn capture_retire(&mut self) {
        let Some(mut capture) = self.capture.take() else {
            return;
        };
        self.main.set_resize_paused(false);
        let Some(shared) = capture.shared.take() else {
            return;
        };
        if !shared.active.load(Ordering::Relaxed) {
            return;
        }
        if capture.cursor_done() && capture.early.is_empty() {
            return;
        }
        let (main, expires) = if capture.cursor_done() {
            (Dict::new(), Dict::new())
        } else {
            (
                std::mem::take(&mut self.main),
                std::mem::take(&mut self.expires),
            )
        };
        shared.retired().push(Retired {
            main,
            expires,
            capture,
        });
    }
}

/// Saves the pre-image of a present key at `position`, unless the cursor
/// passed it or it was saved (or created) already.
fn save_pre_image(
    capture: &mut DbCapture,
    position: usize,
    key: &Blob,
    value: &Value,
    expires: &Dict<Blob, i64>,
) {
    if position < capture.next_position || capture.is_skipped(position, key) {
        return;
    }
    capture.early.push(Record {
        key: key.clone(),
        value: value.clone(),
        expire_at_ms: expires.get(key.as_bytes()).copied(),
    });
    capture.skip_key(position, key.clone());
}

impl Keyspace {
    /// Starts a point-in-time capture of every database (ending any capture
    /// already running). Records are then emitted by
    /// [`Keyspace::capture_step`]. O(number of databases): nothing is
    /// copied up front.
    pub fn begin_capture(&mut self) {
        self.end_capture();
        let shared = Arc::new(Shared {
            active: AtomicBool::new(true),
            retired: Mutex::new(Vec::new()),
        });
        for (index, db) in self.dbs.iter_mut().enumerate() {
            if db.main.is_empty() {
                continue;
            }
            db.main.set_resize_paused(true);
            db.capture = Some(Box::new(DbCapture {
                shared: Some(Arc::clone(&shared)),
                origin: index,
                next_position: 0,
                end_position: db.main.positions(),
                skip: SkipLists::default(),
                early: Vec::new(),
            }));
        }
        self.capture = Some(KeyspaceCapture {
            shared,
            retired: Vec::new(),
        });
    }

    /// True while a capture runs.
    pub fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Emits up to about `max_records` records of the running capture to
    /// `sink` as (database index when the capture began, key, value,
    /// absolute expiry in Unix ms). A bucket is emitted whole, so a step may
    /// exceed `max_records` by the length of one hash chain; a step also
    /// stops after visiting `8 × max_records` buckets.
    ///
    /// Returns true when every record has been emitted: the capture is then
    /// over (resizing resumes everywhere). Also true when no capture runs.
    /// Never true while a captured database taken out of the keyspace is
    /// still alive elsewhere (its records could not be emitted yet).
    pub fn capture_step(&mut self, max_records: usize, sink: &mut CaptureSink<'_>) -> bool {
        let Keyspace { dbs, capture } = self;
        let Some(state) = capture else {
            return true;
        };
        state.retired.append(&mut state.shared.retired());
        let mut budget = Budget::new(max_records);

        // Early records first: they are the ones holding extra memory.
        for retired in &mut state.retired {
            drain_early(&mut retired.capture, &mut budget, sink);
        }
        for db in dbs.iter_mut() {
            match &mut db.capture {
                Some(part) if part.belongs_to(&state.shared) => {
                    drain_early(part, &mut budget, sink);
                }
                Some(_) => {
                    // Part of an earlier capture, put back after it ended.
                    db.capture = None;
                    db.main.set_resize_paused(false);
                }
                None => {}
            }
        }
        if budget.exhausted() {
            return false;
        }

        // Then retired sources (their memory is waiting to be freed).
        while let Some(retired) = state.retired.last_mut() {
            advance_retired(retired, &mut budget, sink);
            if !retired.capture.cursor_done() {
                return false;
            }
            drain_early(&mut retired.capture, &mut budget, sink);
            if !retired.capture.early.is_empty() {
                return false;
            }
            state.retired.pop();
        }

        // Then the live databases, in order.
        for db in dbs.iter_mut() {
            let Db {
                main,
                expires,
                capture,
            } = db;
            let Some(part) = capture else {
                continue;
            };
            advance_live(main, expires, part, &mut budget, sink);
            if part.cursor_done() {
                main.set_resize_paused(false);
                if part.early.is_empty() {
                    *capture = None;
                }
            }
            if budget.exhausted() {
                return false;
            }
        }
        if dbs.iter().any(|db| db.capture.is_some()) {
            return false;
        }
        // Every part of the capture held by a database is gone, except in
        // databases taken out of the keyspace and still alive: each part
        // holds one reference to `shared`.
        if Arc::strong_count(&state.shared) > 1 {
            return false;
        }
        if !state.shared.retired().is_empty() {
            return false;
        }
        self.end_capture();
        true
    }

    /// Ends the running capture, finished or not (an aborted BGSAVE):
    /// releases its memory and resumes resizing.
    pub fn end_capture(&mut self) {
        let Some(state) = self.capture.take() else {
            return;
        };
        state.shared.active.store(false, Ordering::Relaxed);
        for db in &mut self.dbs {
            if db.capture.take().is_some() {
                db.main.set_resize_paused(false);
            }
        }
        // Taken out before dropping: dropping retired tables may take a
        // while, and the lock is not needed for it.
        let retired = std::mem::take(&mut *state.shared.retired());
        drop(retired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::Rng;
    use crate::types::list::End;
    use crate::types::List;
    use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
    use std::collections::BTreeMap;

    /// A value in comparable form (tests use strings and lists).
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Canon {
        Str(Vec<u8>),
        List(Vec<Vec<u8>>),
        Other(String),
    }

    fn canon(value: &Value) -> Canon {
        match value {
            Value::Str(s) => Canon::Str(s.to_vec()),
            Value::List(l) => Canon::List(l.iter().map(|e| e.to_vec()).collect()),
            other => Canon::Other(format!("{other:?}")),
        }
    }

    /// (database, key) → (value, expiry).
    type Image = BTreeMap<(usize, Vec<u8>), (Canon, Option<i64>)>;
    /// One database of the model: key → (value, expiry).
    type ModelDb = BTreeMap<Vec<u8>, (Canon, Option<i64>)>;

    fn image(keyspace: &Keyspace) -> Image {
        let mut out = Image::new();
        for (index, db) in keyspace.iter().enumerate() {
            for (key, value) in db.iter() {
                out.insert((index, key.to_vec()), (canon(value), db.expire_at(key)));
            }
        }
        out
    }

    /// One step; panics on a record emitted twice.
    fn step(keyspace: &mut Keyspace, max_records: usize, out: &mut Image) -> bool {
        keyspace.capture_step(max_records, &mut |db, key, value, at| {
            let previous = out.insert((db, key.to_vec()), (canon(value), at));
            assert!(
                previous.is_none(),
                "db {db} key {:?} emitted twice",
                String::from_utf8_lossy(key)
            );
        })
    }

    fn finish(keyspace: &mut Keyspace, max_records: usize, out: &mut Image) {
        for _ in 0..1_000_000 {
            if step(keyspace, max_records, out) {
                assert!(!keyspace.is_capturing());
                for db in keyspace.iter() {
                    assert!(db.capture.is_none(), "capture state left behind");
                    assert!(!db.main.is_resize_paused(), "resizing left paused");
                }
                return;
            }
        }
        panic!("capture did not finish");
    }

    fn string(s: &str) -> Value {
        Value::Str(Blob::new(s.as_bytes()))
    }

    fn list(items: &[&str]) -> Value {
        let mut l = List::new();
        for item in items {
            l.push(End::Tail, item.as_bytes());
        }
        Value::List(Box::new(l))
    }

    fn filled(dbs: usize, keys_per_db: usize) -> Keyspace {
        let mut ks = Keyspace::new(dbs);
        for index in 0..dbs {
            let db = ks.db_mut(index);
            for k in 0..keys_per_db {
                let key = format!("k{k}");
                if k % 3 == 0 {
                    db.insert_new(key.as_bytes(), list(&["a", "b"]));
                } else {
                    db.insert_new(key.as_bytes(), string(&format!("v{index}-{k}")));
                }
                if k % 5 == 0 {
                    db.set_expire(key.as_bytes(), 1_000 + k as i64);
                }
            }
        }
        ks
    }

    #[test]
    fn no_capture_step_is_done_at_once() {
        let mut ks = filled(2, 10);
        let mut out = Image::new();
        assert!(step(&mut ks, 10, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn unmodified_keyspace_is_emitted_once_each() {
        let mut ks = filled(3, 500);
        let expected = image(&ks);
        ks.begin_capture();
        let mut out = Image::new();
        finish(&mut ks, 7, &mut out);
        assert_eq!(out, expected);
        assert_eq!(image(&ks), expected);
    }

    #[test]
    fn writes_before_the_cursor_emit_the_old_state() {
        let mut ks = filled(1, 2_000);
        let expected = image(&ks);
        ks.begin_capture();
        let mut out = Image::new();
        step(&mut ks, 100, &mut out);
        let db = ks.db_mut(0);
        for k in 0..2_000 {
            let key = format!("k{k}");
            match k % 6 {
                0 => {
                    db.remove(key.as_bytes());
                }
                1 => db.set(key.as_bytes(), string("new"), false),
                2 => {
                    if let Some(Value::List(l)) = db.get_mut(key.as_bytes()) {
                        l.push(End::Head, b"z");
                    }
                }
                3 => {
                    db.set_expire(key.as_bytes(), 5);
                }
                4 => {
                    db.remove_expire(key.as_bytes());
                }
                _ => {
                    db.remove(key.as_bytes());
                    db.insert_new(key.as_bytes(), string("again"));
                }
            }
            db.insert_new(format!("new{k}").as_bytes(), string("fresh"));
        }
        finish(&mut ks, 100, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn capture_started_in_the_middle_of_a_resize_is_exact() {
        let mut ks = Keyspace::new(1);
        let mut k = 0;
        while !(ks.db(0).main.is_rehashing() && ks.db(0).len() > 3_000) {
            ks.db_mut(0)
                .insert_new(format!("k{k}").as_bytes(), string("v"));
            k += 1;
        }
        let expected = image(&ks);
        ks.begin_capture();
        assert!(
            ks.db(0).main.is_rehashing(),
            "rehashing is paused, not finished"
        );
        let mut out = Image::new();
        let mut round = 0;
        while !step(&mut ks, 50, &mut out) {
            // Delete and recreate keys: recreated ones land in the new
            // table, at another position than the one they were saved from.
            let db = ks.db_mut(0);
            for j in 0..20 {
                let key = format!("k{}", (round * 37 + j * 11) % k);
                if db.remove(key.as_bytes()).is_some() {
                    db.insert_new(key.as_bytes(), string("recreated"));
                }
            }
            round += 1;
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn flush_swap_and_clear_keep_the_capture_exact() {
        let mut ks = filled(4, 1_000);
        let expected = image(&ks);
        ks.begin_capture();
        let mut out = Image::new();
        step(&mut ks, 300, &mut out);
        // FLUSHDB as src/command/keys.rs does it: take the database out,
        // read it, drop it.
        let flushed = std::mem::take(ks.db_mut(0));
        assert_eq!(flushed.len(), 1_000);
        drop(flushed);
        ks.db_mut(0).insert_new(b"after-flush", string("x"));
        // SWAPDB.
        let (a, b) = ks.two_dbs_mut(1, 2);
        a.swap(b);
        ks.db_mut(1).set(b"k1", string("changed after swap"), false);
        ks.db_mut(2).remove(b"k2");
        // FLUSHALL-style clear in place.
        ks.db_mut(3).clear();
        ks.db_mut(3).insert_new(b"k1", string("new"));
        finish(&mut ks, 300, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn a_database_held_outside_the_keyspace_delays_completion() {
        let mut ks = filled(2, 100);
        let expected = image(&ks);
        ks.begin_capture();
        let held = std::mem::take(ks.db_mut(1));
        let mut out = Image::new();
        for _ in 0..100 {
            assert!(!step(&mut ks, 1_000, &mut out), "finished without db 1");
        }
        // Put back (like a second swap), then finish.
        *ks.db_mut(1) = held;
        finish(&mut ks, 1_000, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn overload_forces_a_resize_and_stays_exact() {
        let mut ks = filled(1, 64);
        let expected = image(&ks);
        let buckets = ks.db(0).main.bucket_count();
        ks.begin_capture();
        let mut out = Image::new();
        step(&mut ks, 5, &mut out);
        for k in 0..buckets * FORCE_RESIZE_RATIO {
            ks.db_mut(0)
                .set(format!("grow{k}").as_bytes(), string("g"), false);
        }
        assert!(
            !ks.db(0).main.is_resize_paused(),
            "escape hatch resumed resizing"
        );
        // Once a resize frozen by the capture (if any) completes, the next
        // insert grows the table to fit in one go.
        ks.db_mut(0).rehash_for(std::time::Duration::from_secs(1));
        ks.db_mut(0).insert_new(b"one more", string("x"));
        ks.db_mut(0).rehash_for(std::time::Duration::from_secs(1));
        let main = &ks.db(0).main;
        assert!(main.bucket_count() >= main.len(), "table grew to fit");
        for k in 0..64 {
            ks.db_mut(0).remove(format!("k{k}").as_bytes());
        }
        finish(&mut ks, 5, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn bookkeeping_is_proportional_to_touched_keys() {
        let mut ks = filled(1, 20_000);
        ks.begin_capture();
        for k in 0..50 {
            ks.db_mut(0)
                .set(format!("k{k}").as_bytes(), string("x"), false);
            ks.db_mut(0)
                .insert_new(format!("n{k}").as_bytes(), string("x"));
        }
        let part = ks.db(0).capture.as_ref().expect("capturing");
        let skipped: usize = part.skip.values().map(Vec::len).sum();
        assert!(
            skipped <= 100,
            "{skipped} skip entries for 100 touched keys"
        );
        assert!(part.early.len() <= 50);
        // Visited positions drop their skip lists.
        let mut out = Image::new();
        let half = part.end_position / 2;
        while ks.db(0).capture.as_ref().expect("capturing").next_position < half {
            step(&mut ks, 100, &mut out);
        }
        let part = ks.db(0).capture.as_ref().expect("capturing");
        assert!(part.skip.keys().all(|&p| p >= part.next_position));
        assert!(part.skip.values().map(Vec::len).sum::<usize>() < skipped);
        finish(&mut ks, 1_000, &mut out);
        assert_eq!(out.len(), 20_000);
    }

    #[test]
    fn end_capture_aborts_and_resumes_resizing() {
        let mut ks = filled(2, 300);
        ks.begin_capture();
        let held = std::mem::take(ks.db_mut(1));
        ks.db_mut(0).set(b"k1", string("x"), false);
        ks.end_capture();
        assert!(!ks.is_capturing());
        assert!(ks.db(0).capture.is_none());
        assert!(!ks.db(0).main.is_resize_paused());
        // A database taken out during the aborted capture drops its stale
        // part when written to or stepped over.
        *ks.db_mut(1) = held;
        ks.db_mut(1).set(b"k2", string("y"), false);
        assert!(ks.db(1).capture.is_none());
        assert!(!ks.db(1).main.is_resize_paused());
        // A new capture sees the current state.
        let expected = image(&ks);
        ks.begin_capture();
        ks.begin_capture();
        let mut out = Image::new();
        finish(&mut ks, 64, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn dropping_the_keyspace_releases_everything_a_held_database_could_pin() {
        let mut ks = filled(3, 100);
        ks.begin_capture();
        let mut held = std::mem::take(ks.db_mut(1));
        let part = held.capture.as_ref().expect("captured");
        let shared = Arc::clone(part.shared.as_ref().expect("live"));
        drop(ks);
        assert!(
            shared.retired().is_empty(),
            "dropped databases kept by the ended capture"
        );
        // The held database drops its stale part on its next write.
        held.set(b"k1", string("x"), false);
        assert!(held.capture.is_none());
        assert!(!held.main.is_resize_paused());
    }

    #[test]
    fn keyspace_clone_does_not_share_the_capture() {
        let mut ks = filled(1, 100);
        ks.begin_capture();
        let copy = ks.clone();
        assert!(!copy.is_capturing());
        assert!(copy.db(0).capture.is_none());
        drop(copy);
        let expected = image(&ks);
        let mut out = Image::new();
        finish(&mut ks, 10, &mut out);
        assert_eq!(out, expected);
    }

    // ---- property test --------------------------------------------------

    const DBS: usize = 3;
    const KEYS: u16 = 400;

    #[derive(Debug, Clone)]
    enum Op {
        Set {
            db: u8,
            key: u16,
            list: bool,
            keep_ttl: bool,
        },
        Append {
            db: u8,
            key: u16,
        },
        Remove {
            db: u8,
            key: u16,
        },
        Expire {
            db: u8,
            key: u16,
            at: u16,
        },
        Persist {
            db: u8,
            key: u16,
        },
        Move {
            from: u8,
            to: u8,
            key: u16,
        },
        Grow {
            db: u8,
            count: u16,
        },
        Flush {
            db: u8,
        },
        Clear {
            db: u8,
        },
        Swap {
            a: u8,
            b: u8,
        },
        Step {
            records: u8,
        },
    }

    impl Arbitrary for Op {
        fn arbitrary(g: &mut Gen) -> Op {
            let db = u8::arbitrary(g) % DBS as u8;
            let key = u16::arbitrary(g) % KEYS;
            match u8::arbitrary(g) % 40 {
                0..=5 => Op::Set {
                    db,
                    key,
                    list: bool::arbitrary(g),
                    keep_ttl: bool::arbitrary(g),
                },
                6..=10 => Op::Append { db, key },
                11..=14 => Op::Remove { db, key },
                15..=17 => Op::Expire {
                    db,
                    key,
                    at: u16::arbitrary(g),
                },
                18..=19 => Op::Persist { db, key },
                20..=21 => Op::Move {
                    from: db,
                    to: u8::arbitrary(g) % DBS as u8,
                    key,
                },
                22 => Op::Grow {
                    db,
                    count: u16::arbitrary(g) % 700,
                },
                23 => Op::Flush { db },
                24 => Op::Clear { db },
                25 => Op::Swap {
                    a: db,
                    b: u8::arbitrary(g) % DBS as u8,
                },
                _ => Op::Step {
                    records: u8::arbitrary(g) % 64,
                },
            }
        }
    }

    #[derive(Debug, Clone)]
    struct Scenario {
        /// Seed of the keyspace present when the capture begins.
        seed: u64,
        ops: Vec<Op>,
    }

    impl Arbitrary for Scenario {
        fn arbitrary(g: &mut Gen) -> Scenario {
            let len = usize::arbitrary(g) % 600;
            Scenario {
                seed: u64::arbitrary(g),
                ops: (0..len).map(|_| Op::arbitrary(g)).collect(),
            }
        }

        fn shrink(&self) -> Box<dyn Iterator<Item = Scenario>> {
            let seed = self.seed;
            Box::new(self.ops.shrink().map(move |ops| Scenario { seed, ops }))
        }
    }

    fn key_name(key: u16) -> Vec<u8> {
        format!("key:{key}").into_bytes()
    }

    /// A keyspace of random sizes (some tables caught mid-resize), with
    /// strings, lists and TTLs.
    fn initial(seed: u64) -> Keyspace {
        let mut rng = Rng::with_seed(seed);
        let mut ks = Keyspace::new(DBS);
        for index in 0..DBS {
            let db = ks.db_mut(index);
            let inserts = rng.below(u64::from(KEYS) + 200);
            for _ in 0..inserts {
                let key = key_name(rng.below(u64::from(KEYS) + 200) as u16);
                let value = if rng.below(3) == 0 {
                    list(&["x", "y", "z"])
                } else {
                    string(&format!("s{}", rng.below(1000)))
                };
                db.set(&key, value, false);
                if rng.below(4) == 0 {
                    db.set_expire(&key, rng.below(5_000) as i64);
                }
            }
            for _ in 0..rng.below(u64::from(KEYS)) {
                db.remove(&key_name(rng.below(u64::from(KEYS) + 200) as u16));
            }
        }
        ks
    }

    fn apply(ks: &mut Keyspace, op: &Op, grown: &mut u64, out: &mut Image) {
        match *op {
            Op::Set {
                db,
                key,
                list: is_list,
                keep_ttl,
            } => {
                let value = if is_list {
                    list(&["l"])
                } else {
                    string(&format!("set{key}"))
                };
                ks.db_mut(db as usize).set(&key_name(key), value, keep_ttl);
            }
            Op::Append { db, key } => match ks.db_mut(db as usize).get_mut(&key_name(key)) {
                Some(Value::Str(s)) => {
                    let mut bytes = s.to_vec();
                    bytes.push(b'+');
                    *s = Blob::new(&bytes);
                }
                Some(Value::List(l)) => l.push(End::Head, b"+"),
                _ => {}
            },
            Op::Remove { db, key } => {
                ks.db_mut(db as usize).remove(&key_name(key));
            }
            Op::Expire { db, key, at } => {
                ks.db_mut(db as usize)
                    .set_expire(&key_name(key), i64::from(at));
            }
            Op::Persist { db, key } => {
                ks.db_mut(db as usize).remove_expire(&key_name(key));
            }
            Op::Move { from, to, key } => {
                if from != to {
                    let key = key_name(key);
                    let (src, dst) = ks.two_dbs_mut(from as usize, to as usize);
                    if src.contains(&key) && !dst.contains(&key) {
                        let at = src.expire_at(&key);
                        let value = src.remove(&key).expect("checked present");
                        dst.insert_new(&key, value);
                        if let Some(at) = at {
                            dst.set_expire(&key, at);
                        }
                    }
                }
            }
            Op::Grow { db, count } => {
                for _ in 0..count {
                    *grown += 1;
                    let key = format!("grown:{grown}");
                    ks.db_mut(db as usize)
                        .insert_new(key.as_bytes(), string("g"));
                }
            }
            Op::Flush { db } => {
                let flushed = std::mem::take(ks.db_mut(db as usize));
                let _ = flushed.iter().count();
            }
            Op::Clear { db } => ks.db_mut(db as usize).clear(),
            Op::Swap { a, b } => {
                if a != b {
                    let (x, y) = ks.two_dbs_mut(a as usize, b as usize);
                    x.swap(y);
                }
            }
            Op::Step { records } => {
                step(ks, usize::from(records), out);
            }
        }
    }

    /// The same operation on a plain model of the live keyspace.
    fn apply_model(model: &mut [ModelDb], op: &Op, grown: &mut u64) {
        match *op {
            Op::Set {
                db,
                key,
                list: is_list,
                keep_ttl,
            } => {
                let value = if is_list {
                    Canon::List(vec![b"l".to_vec()])
                } else {
                    Canon::Str(format!("set{key}").into_bytes())
                };
                let m = &mut model[db as usize];
                let ttl = if keep_ttl {
                    m.get(&key_name(key)).and_then(|(_, at)| *at)
                } else {
                    None
                };
                m.insert(key_name(key), (value, ttl));
            }
            Op::Append { db, key } => {
                if let Some((value, _)) = model[db as usize].get_mut(&key_name(key)) {
                    match value {
                        Canon::Str(s) => s.push(b'+'),
                        Canon::List(l) => l.insert(0, b"+".to_vec()),
                        Canon::Other(_) => {}
                    }
                }
            }
            Op::Remove { db, key } => {
                model[db as usize].remove(&key_name(key));
            }
            Op::Expire { db, key, at } => {
                if let Some((_, ttl)) = model[db as usize].get_mut(&key_name(key)) {
                    *ttl = Some(i64::from(at));
                }
            }
            Op::Persist { db, key } => {
                if let Some((_, ttl)) = model[db as usize].get_mut(&key_name(key)) {
                    *ttl = None;
                }
            }
            Op::Move { from, to, key } => {
                let key = key_name(key);
                if from != to
                    && model[from as usize].contains_key(&key)
                    && !model[to as usize].contains_key(&key)
                {
                    let entry = model[from as usize].remove(&key).expect("present");
                    model[to as usize].insert(key, entry);
                }
            }
            Op::Grow { db, count } => {
                for _ in 0..count {
                    *grown += 1;
                    model[db as usize].insert(
                        format!("grown:{grown}").into_bytes(),
                        (Canon::Str(b"g".to_vec()), None),
                    );
                }
            }
            Op::Flush { db } | Op::Clear { db } => model[db as usize].clear(),
            Op::Swap { a, b } => model.swap(a as usize, b as usize),
            Op::Step { .. } => {}
        }
    }

    fn capture_is_exact(scenario: Scenario) -> TestResult {
        let mut ks = initial(scenario.seed);
        let expected = image(&ks);
        let mut model: Vec<ModelDb> = vec![ModelDb::new(); DBS];
        for ((db, key), entry) in &expected {
            model[*db].insert(key.clone(), entry.clone());
        }
        ks.begin_capture();
        let mut out = Image::new();
        let (mut grown, mut grown_model) = (0, 0);
        for op in &scenario.ops {
            apply(&mut ks, op, &mut grown, &mut out);
            apply_model(&mut model, op, &mut grown_model);
        }
        finish(&mut ks, 13, &mut out);
        assert_eq!(out, expected, "captured image differs from the start");
        // The hooks did not change what the writes did.
        let mut live = Image::new();
        for (db, m) in model.iter().enumerate() {
            for (key, entry) in m {
                live.insert((db, key.clone()), entry.clone());
            }
        }
        assert_eq!(image(&ks), live, "live keyspace differs from the model");
        for (index, db) in ks.iter().enumerate() {
            for (key, _) in db.iter() {
                assert!(db.contains(key), "db {index}: lookup after capture");
            }
        }
        TestResult::passed()
    }

    #[test]
    fn random_writes_during_a_capture_never_change_what_it_emits() {
        QuickCheck::new()
            .tests(300)
            .quickcheck(capture_is_exact as fn(Scenario) -> TestResult);
    }
}

/// Timings (not assertions): run with
/// `cargo test --release --lib keyspace::capture::timings -- --ignored --nocapture`.
#[cfg(test)]
mod timings {
    use super::*;
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    const KEYS: usize = 1_000_000;

    fn populated() -> Keyspace {
        let mut ks = Keyspace::new(16);
        let db = ks.db_mut(0);
        for i in 0..KEYS {
            let key = format!("key:{i}");
            db.insert_new(
                key.as_bytes(),
                Value::Str(Blob::new(format!("value:{i}").as_bytes())),
            );
        }
        // Settle any resize in progress, as a server idle for a moment would.
        db.rehash_for(Duration::from_secs(10));
        ks
    }

    /// One capture of `ks`, with `writes_between_steps` SETs (on random
    /// keys, half of them existing) between steps. Returns each step's
    /// time and each write's time.
    fn run_capture(
        ks: &mut Keyspace,
        writes_between_steps: usize,
    ) -> (Duration, Vec<Duration>, Vec<Duration>) {
        let mut emitted = 0usize;
        let mut bytes = 0usize;
        let mut steps = Vec::new();
        let mut writes = Vec::new();
        let mut rng = crate::rand::Rng::with_seed(3);
        let started = Instant::now();
        ks.begin_capture();
        steps.push(started.elapsed());
        loop {
            let t = Instant::now();
            let done = ks.capture_step(1000, &mut |_, key, value, at| {
                emitted += 1;
                if let Value::Str(s) = value {
                    bytes += key.len() + s.len() + at.map_or(0, |_| 8);
                }
            });
            steps.push(t.elapsed());
            if done {
                break;
            }
            for _ in 0..writes_between_steps {
                let key = format!("key:{}", rng.below(KEYS as u64 * 2));
                let t = Instant::now();
                ks.db_mut(0)
                    .set(key.as_bytes(), Value::Str(Blob::new(b"overwritten")), false);
                writes.push(t.elapsed());
            }
        }
        black_box(bytes);
        assert!(emitted >= KEYS, "emitted {emitted}");
        (started.elapsed(), steps, writes)
    }

    /// The machine running the tests is shared: a single measurement's
    /// maximum is mostly the scheduler. Each step index is timed in several
    /// runs and the fastest kept, then the longest of those is reported.
    fn report(label: &str, runs: Vec<(Duration, Vec<Duration>, Vec<Duration>)>) {
        let totals: Vec<Duration> = runs.iter().map(|r| r.0).collect();
        let steps = runs.iter().map(|r| r.1.len()).min().unwrap_or(0);
        let per_index: Vec<Duration> = (0..steps)
            .map(|i| runs.iter().map(|r| r.1[i]).min().unwrap_or_default())
            .collect();
        let longest = per_index.iter().copied().max().unwrap_or_default();
        let raw_longest = runs
            .iter()
            .flat_map(|r| r.1.iter().copied())
            .max()
            .unwrap_or_default();
        println!("{label}");
        println!("  total per run: {totals:?}");
        println!(
            "  {} steps (begin_capture + capture_step(1000)); longest step {longest:?} (fastest of {} runs per step), raw max {raw_longest:?}",
            steps,
            runs.len()
        );
        let mut writes: Vec<Duration> = runs.iter().flat_map(|r| r.2.iter().copied()).collect();
        if !writes.is_empty() {
            writes.sort();
            let at = |q: f64| writes[((writes.len() - 1) as f64 * q) as usize];
            let writes_per_run = runs[0].2.len();
            let per_write_index: Vec<Duration> = (0..writes_per_run)
                .map(|i| {
                    runs.iter()
                        .filter_map(|r| r.2.get(i).copied())
                        .min()
                        .unwrap_or_default()
                })
                .collect();
            println!(
                "  SET during capture: p50 {:?} p99 {:?} p99.9 {:?} raw max {:?}; longest (fastest of runs per write) {:?}",
                at(0.5),
                at(0.99),
                at(0.999),
                writes[writes.len() - 1],
                per_write_index.iter().max().copied().unwrap_or_default()
            );
        }
    }

    /// The body of `Db::set` without the capture branch (what it was before).
    fn set_without_hook(db: &mut Db, key: &[u8], value: Value, keep_ttl: bool) {
        match db.main.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                db.main.insert_new(Blob::new(key), value);
            }
        }
        if !keep_ttl && !db.expires.is_empty() {
            db.expires.remove(key);
        }
    }

    fn remove_without_hook(db: &mut Db, key: &[u8]) -> Option<Value> {
        let (_, value) = db.main.remove(key)?;
        if !db.expires.is_empty() {
            db.expires.remove(key);
        }
        Some(value)
    }

    #[test]
    #[ignore = "timing report, run in release"]
    fn timings() {
        let mut ks = populated();
        let runs = (0..5).map(|_| run_capture(&mut ks, 0)).collect();
        report(&format!("capture of {KEYS} string keys, no writes:"), runs);
        drop(ks);
        let runs = (0..3)
            .map(|_| {
                let mut ks = populated();
                run_capture(&mut ks, 100)
            })
            .collect();
        report(
            &format!("capture of {KEYS} string keys, 100 SETs between steps (half overwrites, half new keys):"),
            runs,
        );

        // The load-factor escape hatch: a table filled to 5× its buckets
        // during a capture that has not moved yet (worst case: every record
        // is still unvisited and gets copied by one insert).
        let mut ks = Keyspace::new(1);
        for i in 0..100_000 {
            ks.db_mut(0)
                .insert_new(format!("key:{i}").as_bytes(), Value::Str(Blob::new(b"v")));
        }
        ks.db_mut(0).rehash_for(Duration::from_secs(10));
        ks.begin_capture();
        let mut longest = (Duration::ZERO, 0);
        let mut i = 0;
        while ks.db(0).main.is_resize_paused() {
            let key = format!("new:{i}");
            let t = Instant::now();
            ks.db_mut(0)
                .insert_new(key.as_bytes(), Value::Str(Blob::new(b"v")));
            longest = longest.max((t.elapsed(), i));
            i += 1;
        }
        println!(
            "escape hatch: 100000 unvisited keys, {i} inserts during the capture; the insert that copied them took {:?}",
            longest.0
        );
        drop(ks);

        // For scale: the longest single insert while loading 1M keys with
        // no capture at all (the resize that allocates the new table).
        let mut longest = Duration::MAX;
        for _ in 0..3 {
            let mut db = Db::new();
            let mut run_longest = Duration::ZERO;
            for i in 0..KEYS {
                let key = format!("key:{i}");
                let t = Instant::now();
                db.insert_new(key.as_bytes(), Value::Str(Blob::new(b"v")));
                run_longest = run_longest.max(t.elapsed());
            }
            longest = longest.min(run_longest);
        }
        println!(
            "no capture, loading {KEYS} keys: longest single insert {longest:?} (best of 3 runs)"
        );

        // Per-write overhead with no capture running: the same operations
        // through Db (one extra branch) and through the hook-less body.
        // Small enough to stay in cache, so the branch is not hidden
        // behind cache misses.
        const OVERHEAD_KEYS: usize = 10_000;
        let keys: Vec<Vec<u8>> = (0..OVERHEAD_KEYS)
            .map(|i| format!("key:{i}").into_bytes())
            .collect();
        // [variant][phase]: variant 0 through Db, 1 hook-less.
        let mut best = [[Duration::MAX; 3]; 2];
        for round in 0..300 {
            for v in 0..2 {
                // Alternate which variant runs first.
                let variant = (v + round) % 2;
                let with_hook = variant == 0;
                let mut db = Db::new();
                let mut phase = |i: usize, f: &mut dyn FnMut(&mut Db)| {
                    let t = Instant::now();
                    f(&mut db);
                    best[variant][i] = best[variant][i].min(t.elapsed());
                };
                phase(0, &mut |db| {
                    for key in &keys {
                        if with_hook {
                            db.set(key, Value::Str(Blob::new(b"v")), false);
                        } else {
                            set_without_hook(db, key, Value::Str(Blob::new(b"v")), false);
                        }
                    }
                });
                phase(1, &mut |db| {
                    for key in &keys {
                        if with_hook {
                            db.set(key, Value::Str(Blob::new(b"w")), false);
                        } else {
                            set_without_hook(db, key, Value::Str(Blob::new(b"w")), false);
                        }
                    }
                });
                phase(2, &mut |db| {
                    for key in &keys {
                        if with_hook {
                            black_box(db.remove(key));
                        } else {
                            black_box(remove_without_hook(db, key));
                        }
                    }
                });
                black_box(&db);
            }
        }
        let per_op = |d: Duration| d.as_nanos() as f64 / OVERHEAD_KEYS as f64;
        println!("no capture running, ns/op through Db (one branch) vs hook-less body, best of 300 rounds of {OVERHEAD_KEYS} keys:");
        for (i, name) in [
            "insert (SET new)",
            "overwrite (SET existing)",
            "remove (DEL)",
        ]
        .iter()
        .enumerate()
        {
            println!(
                "  {name}: {:.1} vs {:.1}",
                per_op(best[0][i]),
                per_op(best[1][i])
            );
        }
    }
}
