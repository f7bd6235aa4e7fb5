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
pub(crate) use pace::Pace;

/// Elements per bucket beyond which a paused main table is allowed to
/// resize anyway (Redis's `dict_force_resize_ratio`).
pub const FORCE_RESIZE_RATIO: usize = 5;

/// How many positions ahead of the cursor a live capture prefetches.
const PREFETCH_AHEAD: usize = 8;

/// Positions a step may visit per record it may emit, so a step over a
/// sparse table (many emptied buckets: shrinking is paused) stays bounded.
const POSITIONS_PER_RECORD: usize = 8;

/// A record saved before the cursor reached it.
struct Record {
    key: Blob,
    value: Value,
    expire_at_ms: Option<i64>,
}

/// Estimated heap bytes of a saved record's cloned key and value (as
/// malloc blocks: a header, rounded up to 16, 32 at least).
fn record_heap(key: &Blob, value: &Value) -> usize {
    const ELEMENT: usize = 64;
    let block = |n: usize| {
        if n == 0 {
            0
        } else {
            ((n + 8 + 15) & !15).max(32)
        }
    };
    let value_bytes = match value {
        Value::Str(s) => block(s.heap_size()),
        Value::List(l) => l.heap_bytes(),
        other => other.length() * ELEMENT,
    };
    block(key.heap_size()) + value_bytes
}

/// Estimated bytes of one position's skip list: its B-tree slot and its
/// vector of keys (allocated for 4 keys) with one key.
const SKIP_ENTRY_BYTES: usize = 176;

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
    /// Estimated heap bytes of the early records' keys and values
    /// ([`record_heap`]).
    early_heap: usize,
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
    /// Estimated bytes this capture holds outside the keyspace: the early
    /// records (their vector's capacity and their keys' and values'
    /// heap) and the skip lists.
    fn held_bytes(&self) -> usize {
        self.early.capacity() * std::mem::size_of::<Record>()
            + self.early_heap
            + self.skip.len() * SKIP_ENTRY_BYTES
    }

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
            capture.early_heap = 0;
            return;
        };
        capture.early_heap = capture
            .early_heap
            .saturating_sub(record_heap(&record.key, &record.value));
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
        main.prefetch_position(position + PREFETCH_AHEAD);
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
            ..
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
            ..
        } = self;
        let capture = capture.as_mut().expect("called while capturing");
        let mut early = std::mem::take(&mut capture.early);
        let mut added = 0;
        // Walked alongside the positions (both in order) rather than looked
        // up per position.
        let mut skips = capture.skip.range(capture.next_position..).peekable();
        for position in capture.next_position..capture.end_position {
            let skip = skips.next_if(|(&p, _)| p == position).map(|(_, keys)| keys);
            main.visit_position(position, |key, value| {
                if skip.is_some_and(|keys| keys.iter().any(|k| k == key)) {
                    return;
                }
                added += record_heap(key, value);
                early.push(Record {
                    key: key.clone(),
                    value: value.clone(),
                    expire_at_ms: expires.get(key).copied(),
                });
            });
        }
        capture.early = early;
        capture.early_heap += added;
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
    capture.early_heap += record_heap(key, value);
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
                early_heap: 0,
            }));
        }
        self.capture = Some(KeyspaceCapture {
            shared,
            retired: Vec::new(),
        });
        self.capture_pace.restart(std::time::Instant::now());
    }

    /// Paces captures at `rdb-key-save-delay` (`delay` µs per key; see
    /// `Pace::set_delay`); read again before every slice, so a change
    /// applies to a running capture.
    pub fn set_capture_key_delay(&mut self, delay: i32) {
        self.capture_pace
            .set_delay(delay, std::time::Instant::now());
    }

    /// While a paced capture waits for its next key to be due: how long
    /// (the host sleeps that long instead of driving the capture).
    pub fn capture_wait(&self) -> Option<std::time::Duration> {
        self.capture
            .as_ref()
            .and_then(|_| self.capture_pace.wait(std::time::Instant::now()))
    }

    /// True while a capture runs.
    pub fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    /// Estimated bytes the running capture holds outside the keyspace: the
    /// old values of keys written or removed before the cursor reached
    /// them, waiting to be emitted, and the lists of keys it must skip.
    /// Like a fork's copied pages for Redis, `maxmemory` leaves them out.
    pub fn capture_held_bytes(&self) -> usize {
        if self.capture.is_none() {
            return 0;
        }
        self.dbs
            .iter()
            .filter_map(|db| db.capture.as_ref())
            .map(|c| c.held_bytes())
            .sum()
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
    ///
    /// Under `rdb-key-save-delay` ([`Keyspace::set_capture_key_delay`]) a
    /// step emits no more keys than are due, none while
    /// [`Keyspace::capture_wait`] says to wait.
    pub fn capture_step(&mut self, max_records: usize, sink: &mut CaptureSink<'_>) -> bool {
        if self.capture.is_none() {
            return true;
        }
        let now = std::time::Instant::now();
        let allowed = self.capture_pace.allowance(now);
        if allowed == 0 {
            return false;
        }
        let mut emitted = 0;
        let done =
            self.capture_step_unpaced(max_records.min(allowed), &mut |db, key, value, at| {
                emitted += 1;
                sink(db, key, value, at);
            });
        self.capture_pace.emitted(emitted, now);
        done
    }

    fn capture_step_unpaced(&mut self, max_records: usize, sink: &mut CaptureSink<'_>) -> bool {
        let Keyspace { dbs, capture, .. } = self;
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
                ..
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

mod pace;

#[cfg(test)]
mod tests;

/// Timings (not assertions): run with
/// `cargo test --release --lib keyspace::capture::timings -- --ignored --nocapture`.
#[cfg(test)]
mod timings;
