//! Streams: an append-only log of entries keyed by 128-bit IDs, with
//! consumer groups, their pending-entries lists (PEL) and consumers.
//!
//! The layout mirrors Redis 7.0's `stream` / `streamCG` / `streamConsumer`
//! / `streamNACK` so that every counter Redis reports (entries-added,
//! max-deleted-entry-id, entries-read, lag) can be reported the same way.
//! Groups and consumers are kept in byte order of their names, as Redis's
//! radix trees return them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;

use super::Blob;

/// A stream entry ID: milliseconds and a sequence number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Unix time in milliseconds (or any number an explicit ID chose).
    pub ms: u64,
    /// Sequence number within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// The smallest ID, `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID, `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID from its two parts.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID, or None after [`StreamId::MAX`] (Redis's `streamIncrID`).
    pub fn next(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID, or None before [`StreamId::MIN`] (`streamDecrID`).
    pub fn prev(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The ID as Redis prints it (`<ms>-<seq>`), as bytes.
    pub fn to_bytes(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry: its field/value pairs in insertion order.
pub type Fields = Box<[(Blob, Blob)]>;

/// How big one listpack node of a stream may grow before XADD starts a new
/// one (`stream-node-max-entries` / `stream-node-max-bytes`). Approximate
/// trimming (`~`) removes whole nodes only, so the node layout is part of
/// the observable behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Maximum entries (live and deleted) per node; 0 = no limit.
    pub max_entries: u64,
    /// Maximum listpack bytes per node; 0 = Redis's hard cap of 1 GiB.
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

/// Redis refuses entries whose fields and values together exceed this, and
/// never lets a node grow past it (`STREAM_LISTPACK_MAX_SIZE`).
pub const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// How [`Stream::trim`] decides what to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries (MAXLEN).
    MaxLen(u64),
    /// Remove entries with IDs below this one (MINID).
    MinId(StreamId),
}

/// Why [`Stream::add`] refused an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// The ID is not greater than the stream's last ID (or the automatic
    /// sequence would overflow).
    IdTooSmall,
    /// The fields and values are too large for a listpack node (also what
    /// Redis reports when `<ms>-*` finds the sequence exhausted).
    TooLarge,
}

/// One listpack node of Redis's radix tree, reduced to what decides the
/// node layout: its counters, its byte size and its master fields. The
/// node's key (the map key in [`Stream`]) is its master ID, the ID of the
/// first entry appended to it; entries are never physically removed from
/// a node, only flagged deleted, so the master ID stays its first entry.
#[derive(Debug, Clone)]
struct Node {
    /// ID of the last entry appended (live or deleted).
    last_id: StreamId,
    /// Live entries.
    live: u64,
    /// Entries flagged deleted (tombstones).
    deleted: u64,
    /// Listpack bytes except the live/deleted counters, whose encoded
    /// size changes with their values.
    body_bytes: u64,
    /// Field names of the master entry (entries with the same names are
    /// stored without them).
    master_fields: Box<[Blob]>,
}

impl Node {
    /// The listpack's total size (`lpBytes`).
    fn bytes(&self) -> u64 {
        self.body_bytes + lp::int_size(self.live as i64) + lp::int_size(self.deleted as i64)
    }
}

/// Sizes of listpack elements (Redis's `listpack.c` encodings), enough to
/// know each node's `lpBytes` exactly.
mod lp {
    /// Listpack header (total bytes + element count) plus the end marker.
    pub const EMPTY: u64 = 6 + 1;

    /// Bytes of an integer element: encoding plus its one-byte back length.
    pub fn int_size(v: i64) -> u64 {
        let enc = match v {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8_388_608..=8_388_607 => 4,
            -2_147_483_648..=2_147_483_647 => 5,
            _ => 9,
        };
        enc + 1
    }

    /// Bytes of a string element, which is stored as an integer when it is
    /// one in canonical form (`lpStringToInt64`).
    pub fn str_size(s: &[u8]) -> u64 {
        if let Some(v) = string_to_i64(s) {
            return int_size(v);
        }
        let len = s.len() as u64;
        let enc = if len < 64 {
            1 + len
        } else if len < 4096 {
            2 + len
        } else {
            5 + len
        };
        enc + backlen_size(enc)
    }

    /// Bytes of the back length that follows an element of `enc` bytes.
    fn backlen_size(enc: u64) -> u64 {
        match enc {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        }
    }

    /// `lpStringToInt64`: decimal without leading zeros, sign `-` only,
    /// fewer than 21 bytes, within i64.
    fn string_to_i64(s: &[u8]) -> Option<i64> {
        if s.is_empty() || s.len() >= 21 {
            return None;
        }
        if s == b"0" {
            return Some(0);
        }
        let (negative, digits) = match s.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, s),
        };
        match digits.first() {
            Some(b'1'..=b'9') => {}
            _ => return None,
        }
        let mut v: u64 = 0;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        if negative {
            if v > 1 << 63 {
                None
            } else {
                Some((v as i64).wrapping_neg())
            }
        } else {
            i64::try_from(v).ok()
        }
    }
}

/// One listpack node of a stream as files record it (see
/// [`Stream::node_layouts`]).
#[derive(Debug, Clone, Copy)]
pub struct NodeLayout<'a> {
    /// The ID of the node's first entry (its radix-tree key).
    pub master_id: StreamId,
    /// The ID of the last entry appended to the node, live or deleted.
    pub last_id: StreamId,
    /// Live entries: `range(master_id, last_id)`.
    pub live: u64,
    /// Entries flagged deleted.
    pub deleted: u64,
    /// The listpack's bytes except its live/deleted counters.
    pub body_bytes: u64,
    /// Field names of the master entry.
    pub master_fields: &'a [Blob],
}

/// A stream value.
///
/// Entries live in an ordered map for lookups and ranges; beside it the
/// stream keeps a model of Redis's listpack nodes (which entries share a
/// node, how many bytes it has, its tombstones) because approximate
/// trimming removes whole nodes and XINFO reports the node count.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// Live entries by ID.
    entries: BTreeMap<StreamId, Fields>,
    /// The listpack nodes by master ID.
    nodes: BTreeMap<StreamId, Node>,
    /// The last ID ever generated or added (0-0 when none).
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    pub first_id: StreamId,
    /// The largest ID ever deleted (XDEL or trimming), 0-0 when none.
    pub max_deleted_entry_id: StreamId,
    /// How many entries were ever added (XADD count, all time).
    pub entries_added: u64,
    /// Consumer groups by name.
    pub groups: BTreeMap<Blob, ConsumerGroup>,
}

/// A consumer group (`streamCG`).
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    /// Last ID delivered to a consumer of the group.
    pub last_id: StreamId,
    /// Entries the group has read, or [`ENTRIES_READ_INVALID`] when it
    /// cannot be known (Redis's `SCG_INVALID_ENTRIES_READ`).
    pub entries_read: i64,
    /// Delivered and not yet acknowledged entries.
    pub pel: BTreeMap<StreamId, PendingEntry>,
    /// Consumers by name.
    pub consumers: BTreeMap<Blob, Consumer>,
}

/// `entries_read` of a group whose read counter cannot be known.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// One pending entry of a group (`streamNACK`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// Unix ms of the last delivery.
    pub delivery_time_ms: i64,
    /// Number of deliveries.
    pub delivery_count: u64,
    /// The consumer it was last delivered to.
    pub consumer: Blob,
}

/// A consumer of a group (`streamConsumer`).
#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Unix ms when the consumer was last active.
    pub seen_time_ms: i64,
    /// IDs of the entries pending for this consumer (each also in the
    /// group's PEL, which holds the details).
    pub pel: BTreeSet<StreamId>,
}

impl Stream {
    /// An empty stream.
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the stream has no entries (it may still have groups).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of listpack nodes (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The entry with this ID.
    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    /// Appends an entry with the default node limits. The caller
    /// guarantees `id > last_id`; updates the last ID, the first ID and the
    /// all-time count.
    pub fn append(&mut self, id: StreamId, fields: Fields) {
        self.append_with_limits(id, fields, NodeLimits::default());
    }

    /// [`Stream::append`] with explicit node limits.
    pub fn append_with_limits(&mut self, id: StreamId, fields: Fields, limits: NodeLimits) {
        debug_assert!(
            id > self.last_id || (self.entries_added == 0 && id > StreamId::MIN),
            "stream IDs only grow"
        );
        let raw_bytes: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        self.place_in_node(id, &fields, raw_bytes, limits);
        if self.entries.is_empty() {
            self.first_id = id;
        }
        self.entries.insert(id, fields);
        self.last_id = id;
        self.entries_added += 1;
    }

    /// The ID XADD would use: `id` as given (`seq_given`), `<ms>-*` (the
    /// next sequence within `ms`), or None for `*` (the clock `now_ms`, or
    /// the next sequence when the clock is not ahead of the last ID), as
    /// Redis's `streamAppendItem`. None when the resulting ID would not be
    /// greater than the last ID.
    pub fn next_id(&self, id: Option<StreamId>, seq_given: bool, now_ms: u64) -> Option<StreamId> {
        self.pick_id(id, seq_given, now_ms).ok()
    }

    /// [`Stream::next_id`] with the error Redis reports: an exhausted
    /// sequence for `<ms>-*` fails without setting `errno`, so XADD then
    /// reports it as [`AddError::TooLarge`].
    fn pick_id(
        &self,
        id: Option<StreamId>,
        seq_given: bool,
        now_ms: u64,
    ) -> Result<StreamId, AddError> {
        let new_id = match id {
            Some(id) if seq_given => id,
            Some(id) => {
                if self.last_id.ms == id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AddError::TooLarge);
                    }
                    StreamId::new(id.ms, self.last_id.seq + 1)
                } else {
                    id
                }
            }
            None => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    // Wraps to 0-0 after the last possible ID, which the
                    // check below refuses.
                    self.last_id.next().unwrap_or(StreamId::MIN)
                }
            }
        };
        if new_id > self.last_id {
            Ok(new_id)
        } else {
            Err(AddError::IdTooSmall)
        }
    }

    /// XADD's append: picks the ID as [`Stream::next_id`], checks the size
    /// limit, and appends. Returns the ID added.
    pub fn add(
        &mut self,
        id: Option<StreamId>,
        seq_given: bool,
        now_ms: u64,
        fields: Fields,
        limits: NodeLimits,
    ) -> Result<StreamId, AddError> {
        let new_id = self.pick_id(id, seq_given, now_ms)?;
        let raw_bytes: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        if raw_bytes > LISTPACK_MAX_SIZE {
            return Err(AddError::TooLarge);
        }
        self.append_with_limits(new_id, fields, limits);
        Ok(new_id)
    }

    /// Accounts for a new entry in the node model: appends it to the tail
    /// node or starts a new node, with Redis's rules and byte sizes.
    fn place_in_node(&mut self, id: StreamId, fields: &Fields, raw_bytes: u64, limits: NodeLimits) {
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let tail = self.nodes.last_entry().filter(|tail| {
            let node = tail.get();
            node.bytes() + raw_bytes < max_bytes
                && (limits.max_entries == 0 || node.live + node.deleted < limits.max_entries)
        });
        let values: u64 = fields.iter().map(|(_, v)| lp::str_size(v)).sum();
        let numfields = fields.len() as u64;
        match tail {
            Some(mut tail) => {
                let master_id = *tail.key();
                let node = tail.get_mut();
                let same_fields = node.master_fields.len() == fields.len()
                    && node
                        .master_fields
                        .iter()
                        .zip(fields.iter())
                        .all(|(m, (f, _))| m == f);
                node.body_bytes += entry_bytes(id, master_id, fields, values, same_fields);
                node.live += 1;
                node.last_id = id;
            }
            None => {
                let master_fields: Box<[Blob]> = fields.iter().map(|(f, _)| f.clone()).collect();
                let master_bytes = lp::int_size(numfields as i64)
                    + master_fields.iter().map(|f| lp::str_size(f)).sum::<u64>()
                    + lp::int_size(0);
                let body_bytes =
                    lp::EMPTY + master_bytes + entry_bytes(id, id, fields, values, true);
                self.nodes.insert(
                    id,
                    Node {
                        last_id: id,
                        live: 1,
                        deleted: 0,
                        body_bytes,
                        master_fields,
                    },
                );
            }
        }
    }

    /// Removes the entry with this ID (XDEL); true if it existed. Keeps
    /// `max_deleted_entry_id` and `first_id` current.
    pub fn remove(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        // The entry's node is the one with the greatest master ID <= its
        // ID. XSETID on an emptied stream can make Redis append an entry
        // below the tail node's master ID; Redis then finds it by starting
        // at the first node, and so does this.
        let master_id = self
            .nodes
            .range(..=id)
            .next_back()
            .or_else(|| self.nodes.first_key_value())
            .map(|(master_id, _)| *master_id);
        if let Some(master_id) = master_id {
            if let Some(node) = self.nodes.get_mut(&master_id) {
                if node.live <= 1 {
                    // The last live entry of a node takes the whole node
                    // with it.
                    self.nodes.remove(&master_id);
                } else {
                    node.live -= 1;
                    node.deleted += 1;
                }
            }
        }
        if id > self.max_deleted_entry_id {
            self.max_deleted_entry_id = id;
        }
        self.refresh_first_id();
        true
    }

    /// Trims the stream from its head (XTRIM, XADD's MAXLEN/MINID) as
    /// Redis's `streamTrim`: whole nodes go first; with `approx` only whole
    /// nodes go; otherwise entries of the next node are flagged deleted
    /// until the goal is met. `limit` (0 = none) caps the entries removed
    /// by whole nodes. Returns the number of entries removed. Trimming does
    /// not change `max_deleted_entry_id`.
    pub fn trim(&mut self, strategy: TrimStrategy, approx: bool, limit: u64) -> u64 {
        let mut deleted: u64 = 0;
        loop {
            if let TrimStrategy::MaxLen(max_len) = strategy {
                if self.len() as u64 <= max_len {
                    break;
                }
            }
            let Some(mut first) = self.nodes.first_entry() else {
                break;
            };
            let node = first.get_mut();
            let in_node = node.live;
            if limit != 0 && deleted + in_node > limit {
                break;
            }
            let remove_node = match strategy {
                TrimStrategy::MaxLen(max_len) => {
                    (self.entries.len() as u64).saturating_sub(in_node) >= max_len
                }
                TrimStrategy::MinId(min_id) => node.last_id < min_id,
            };
            if remove_node {
                let last = node.last_id;
                first.remove();
                self.remove_live_through(last);
                deleted += in_node;
                continue;
            }
            if approx {
                break;
            }
            // Flag the node's first live entries (which are the stream's
            // first ones, the nodes before having gone) deleted.
            let mut flagged = 0;
            let mut remaining = self.entries.len() as u64;
            while let Some(entry) = self.entries.first_entry() {
                let stop = match strategy {
                    TrimStrategy::MaxLen(max_len) => remaining <= max_len,
                    TrimStrategy::MinId(min_id) => *entry.key() >= min_id,
                };
                if stop || *entry.key() > node.last_id {
                    break;
                }
                entry.remove();
                remaining -= 1;
                flagged += 1;
            }
            node.live = node.live.saturating_sub(flagged);
            node.deleted += flagged;
            deleted += flagged;
            break;
        }
        if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Drops the live entries with IDs up to `last` (a removed node's).
    fn remove_live_through(&mut self, last: StreamId) {
        while let Some(entry) = self.entries.first_entry() {
            if *entry.key() > last {
                break;
            }
            entry.remove();
        }
    }

    /// The first entry ID counting tombstones, or [`StreamId::MAX`] when the
    /// stream has no nodes (Redis's `streamGetEdgeID(s, 1, 0)`, which
    /// XADD/XTRIM propagate as the MINID of an approximate trim).
    pub fn first_id_with_tombstones(&self) -> StreamId {
        self.nodes
            .first_key_value()
            .map_or(StreamId::MAX, |(id, _)| *id)
    }

    /// Entries with IDs in `start..=end`, ascending, or descending when
    /// `rev`.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (StreamId, &Fields)> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let iter = self
            .entries
            .range((Bound::Included(start), Bound::Included(end)))
            .map(|(id, f)| (*id, f));
        if rev {
            Box::new(iter.rev())
        } else {
            Box::new(iter)
        }
    }

    /// The first live entry.
    pub fn first(&self) -> Option<(StreamId, &Fields)> {
        self.entries.first_key_value().map(|(id, f)| (*id, f))
    }

    /// The last live entry.
    pub fn last(&self) -> Option<(StreamId, &Fields)> {
        self.entries.last_key_value().map(|(id, f)| (*id, f))
    }

    /// The logical read counter of `id` (its distance from the first entry
    /// ever added), or [`ENTRIES_READ_INVALID`] when it cannot be known
    /// (Redis's `streamEstimateDistanceFromFirstEverEntry`).
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.is_empty() && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_entry_id == StreamId::MIN || self.max_deleted_entry_id < self.first_id {
            // No fragmentation ahead of the first entry.
            if id < self.first_id {
                return added - self.len() as i64;
            }
            if id == self.first_id {
                return added - self.len() as i64 + 1;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// The number of nodes of Redis's radix tree holding this stream's
    /// listpack nodes (XINFO's `radix-tree-nodes`). The keys are the
    /// 16-byte big-endian master IDs; the tree has a compressed node for
    /// every run of bytes all its keys share below a branch, a branching
    /// node where they part, and one node where each key ends.
    pub fn radix_tree_nodes(&self) -> i64 {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|id| {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&id.ms.to_be_bytes());
                k[8..].copy_from_slice(&id.seq.to_be_bytes());
                k
            })
            .collect();
        if keys.is_empty() {
            return 1;
        }
        rax_nodes(&keys, 0)
    }

    /// Every listpack node's full layout in ID order, as the native
    /// snapshot records it (with [`Stream::restore_node`] it comes back
    /// exactly, tombstones included, though not their contents).
    pub fn node_layouts(&self) -> impl Iterator<Item = NodeLayout<'_>> + '_ {
        self.nodes.iter().map(|(id, node)| NodeLayout {
            master_id: *id,
            last_id: node.last_id,
            live: node.live,
            deleted: node.deleted,
            body_bytes: node.body_bytes,
            master_fields: &node.master_fields,
        })
    }

    /// Restores a node recorded by [`Stream::node_layouts`], as it was:
    /// counters, bytes and master fields. Nodes come in master-ID order and
    /// hold at least one entry, live or deleted. The live entries follow,
    /// all nodes' in one ascending run, with [`Stream::restore_entry`];
    /// [`Stream::check_restored`] then checks they add up.
    pub fn restore_node(&mut self, layout: NodeLayout<'_>) -> Result<(), &'static str> {
        if !self.entries.is_empty() {
            return Err("stream node after its entries");
        }
        if self
            .nodes
            .last_key_value()
            .is_some_and(|(last, _)| layout.master_id <= *last)
        {
            return Err("stream nodes out of order");
        }
        if layout.live.saturating_add(layout.deleted) == 0 {
            return Err("stream node with no entries");
        }
        self.nodes.insert(
            layout.master_id,
            Node {
                last_id: layout.last_id,
                live: layout.live,
                deleted: layout.deleted,
                body_bytes: layout.body_bytes,
                master_fields: layout.master_fields.into(),
            },
        );
        Ok(())
    }

    /// Adds a live entry after the nodes restored by
    /// [`Stream::restore_node`]; IDs ascend.
    pub fn restore_entry(&mut self, id: StreamId, fields: Fields) -> Result<(), &'static str> {
        if self
            .entries
            .last_key_value()
            .is_some_and(|(last, _)| id <= *last)
        {
            return Err("stream entry IDs not ascending");
        }
        self.entries.insert(id, fields);
        Ok(())
    }

    /// Checks that the restored nodes' live counts add up to the restored
    /// entries.
    pub fn check_restored(&self) -> Result<(), &'static str> {
        let live = self
            .nodes
            .values()
            .fold(0u64, |sum, n| sum.saturating_add(n.live));
        if live == self.entries.len() as u64 {
            Ok(())
        } else {
            Err("stream node live counts differ from the entries")
        }
    }

    /// Starts a node with this master ID and master fields while loading a
    /// file that records the node layout (Redis's RDB). Entries follow
    /// with [`Stream::load_entry`]; the loader sets `last_id`, `first_id`,
    /// `max_deleted_entry_id` and `entries_added` from the file.
    pub fn load_node(
        &mut self,
        master_id: StreamId,
        master_fields: Box<[Blob]>,
    ) -> Result<(), &'static str> {
        if let Some((_, last)) = self.nodes.last_key_value() {
            if master_id <= last.last_id {
                return Err("stream nodes overlap or are out of order");
            }
        }
        let master_bytes = lp::int_size(master_fields.len() as i64)
            + master_fields.iter().map(|f| lp::str_size(f)).sum::<u64>()
            + lp::int_size(0);
        self.nodes.insert(
            master_id,
            Node {
                last_id: master_id,
                live: 0,
                deleted: 0,
                body_bytes: lp::EMPTY + master_bytes,
                master_fields,
            },
        );
        Ok(())
    }

    /// Appends an entry (live, or a tombstone when `deleted`) to the node
    /// started last by [`Stream::load_node`]. IDs must grow within the
    /// node and not be below its master ID.
    pub fn load_entry(
        &mut self,
        id: StreamId,
        fields: Fields,
        deleted: bool,
    ) -> Result<(), &'static str> {
        let Some(mut tail) = self.nodes.last_entry() else {
            return Err("stream entry outside any node");
        };
        let master_id = *tail.key();
        let node = tail.get_mut();
        let first_in_node = node.live + node.deleted == 0;
        if id < master_id || (!first_in_node && id <= node.last_id) {
            return Err("stream entry IDs out of order");
        }
        let same_fields = node.master_fields.len() == fields.len()
            && node
                .master_fields
                .iter()
                .zip(fields.iter())
                .all(|(m, (f, _))| m == f);
        let values: u64 = fields.iter().map(|(_, v)| lp::str_size(v)).sum();
        node.body_bytes += entry_bytes(id, master_id, &fields, values, same_fields);
        node.last_id = id;
        if deleted {
            node.deleted += 1;
        } else {
            node.live += 1;
            self.entries.insert(id, fields);
        }
        Ok(())
    }

    fn refresh_first_id(&mut self) {
        self.first_id = self
            .entries
            .first_key_value()
            .map_or(StreamId::MIN, |(id, _)| *id);
    }
}

/// Nodes of the radix tree below `depth` for sorted, distinct, equally
/// long `keys` that share their first `depth` bytes.
fn rax_nodes(keys: &[[u8; 16]], depth: usize) -> i64 {
    if keys.len() == 1 {
        // What is left of the key in one compressed node, then its end.
        return if depth < 16 { 2 } else { 1 };
    }
    let first = &keys[0];
    let last = &keys[keys.len() - 1];
    // Sorted keys: the common prefix of all is that of the first and last.
    let common = (depth..16).take_while(|&i| first[i] == last[i]).count();
    let at = depth + common;
    let mut nodes = i64::from(common > 0) + 1;
    let mut start = 0;
    while start < keys.len() {
        let byte = keys[start][at];
        let end = start + keys[start..].iter().take_while(|k| k[at] == byte).count();
        nodes += rax_nodes(&keys[start..end], at + 1);
        start = end;
    }
    nodes
}

/// Listpack bytes of one entry appended to a node whose master ID is
/// `master_id`; `values` is the size of its value elements.
fn entry_bytes(
    id: StreamId,
    master_id: StreamId,
    fields: &Fields,
    values: u64,
    same_fields: bool,
) -> u64 {
    let numfields = fields.len() as u64;
    // Redis stores the ID as differences from the master ID, computed in
    // unsigned arithmetic and stored as signed 64-bit integers.
    let ms_diff = id.ms.wrapping_sub(master_id.ms) as i64;
    let seq_diff = id.seq.wrapping_sub(master_id.seq) as i64;
    let mut bytes = lp::int_size(0) + lp::int_size(ms_diff) + lp::int_size(seq_diff) + values;
    let lp_count = if same_fields {
        numfields + 3
    } else {
        bytes += lp::int_size(numfields as i64)
            + fields.iter().map(|(f, _)| lp::str_size(f)).sum::<u64>();
        2 * numfields + 4
    };
    bytes + lp::int_size(lp_count as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(f, v)| (Blob::from(f.as_bytes()), Blob::from(v.as_bytes())))
            .collect()
    }

    #[test]
    fn ids_step_across_the_sequence_boundary() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(5, 7).to_string(), "5-7");
    }

    #[test]
    fn append_remove_and_range_keep_the_counters() {
        let mut s = Stream::new();
        for i in 1..=5 {
            s.append(StreamId::new(i, 0), fields(&[("f", "v")]));
        }
        assert_eq!(s.len(), 5);
        assert_eq!(s.first_id, StreamId::new(1, 0));
        assert!(s.remove(StreamId::new(1, 0)));
        assert!(!s.remove(StreamId::new(1, 0)));
        assert_eq!(s.first_id, StreamId::new(2, 0));
        assert_eq!(s.max_deleted_entry_id, StreamId::new(1, 0));
        assert_eq!(s.entries_added, 5);
        let back: Vec<u64> = s
            .range(StreamId::new(2, 0), StreamId::new(4, 0), true)
            .map(|(id, _)| id.ms)
            .collect();
        assert_eq!(back, vec![4, 3, 2]);
    }

    fn small(i: u64) -> (StreamId, Fields) {
        (StreamId::new(i, 0), fields(&[("f", "v")]))
    }

    #[test]
    fn listpack_sizes_follow_the_encodings() {
        assert_eq!(lp::int_size(0), 2);
        assert_eq!(lp::int_size(127), 2);
        assert_eq!(lp::int_size(128), 3);
        assert_eq!(lp::int_size(-1), 3);
        assert_eq!(lp::int_size(-4097), 4);
        assert_eq!(lp::int_size(40_000), 5);
        assert_eq!(lp::int_size(i64::from(i32::MAX)), 6);
        assert_eq!(lp::int_size(i64::MIN), 10);
        assert_eq!(lp::str_size(b"v"), 3);
        assert_eq!(lp::str_size(b"12"), 2);
        assert_eq!(lp::str_size(b"012"), 5);
        assert_eq!(lp::str_size(b"-0"), 4);
        assert_eq!(lp::str_size(b"-9223372036854775808"), 10);
        assert_eq!(lp::str_size(b"9223372036854775808"), 21);
        assert_eq!(lp::str_size(&[b'x'; 63]), 65);
        assert_eq!(lp::str_size(&[b'x'; 64]), 67);
        assert_eq!(lp::str_size(&[b'x'; 125]), 128);
        assert_eq!(lp::str_size(&[b'x'; 126]), 130);
        assert_eq!(lp::str_size(&[b'x'; 4096]), 4101 + 2);
    }

    #[test]
    fn a_one_entry_node_has_the_bytes_redis_gives_it() {
        let mut s = Stream::new();
        let (id, f) = small(1);
        s.append(id, f);
        // Header and end (7), counters 1/0 (2+2), master: 1 field (2), "f"
        // (3), terminator (2); entry: flags, ms and seq diffs (2+2+2), "v"
        // (3), lp-count (2).
        assert_eq!(s.nodes[&id].bytes(), 29);
    }

    #[test]
    fn nodes_split_at_100_entries_and_at_4096_bytes() {
        let mut s = Stream::new();
        for i in 1..=250 {
            let (id, f) = small(i);
            s.append(id, f);
        }
        assert_eq!(s.node_count(), 3);
        let mut big = Stream::new();
        for i in 1..=10 {
            big.append(
                StreamId::new(i, 0),
                vec![(Blob::from("f"), Blob::from(vec![b'x'; 1000]))].into_boxed_slice(),
            );
        }
        // 1000-byte values: four fit below 4096 bytes per node.
        assert_eq!(big.node_count(), 3);
    }

    #[test]
    fn deleting_the_last_live_entry_of_a_node_drops_the_node() {
        let mut s = Stream::new();
        for i in 1..=150 {
            let (id, f) = small(i);
            s.append(id, f);
        }
        assert_eq!(s.node_count(), 2);
        for i in 101..=150 {
            assert!(s.remove(StreamId::new(i, 0)));
        }
        assert_eq!(s.node_count(), 1);
        assert_eq!(s.max_deleted_entry_id, StreamId::new(150, 0));
        // Tombstones still count towards the node's capacity.
        for i in 1..=50 {
            assert!(s.remove(StreamId::new(i, 0)));
        }
        s.append(StreamId::new(151, 0), fields(&[("f", "v")]));
        assert_eq!(s.node_count(), 2);
    }

    #[test]
    fn approximate_trimming_removes_whole_nodes_only() {
        let mut s = Stream::new();
        for i in 1..=250 {
            let (id, f) = small(i);
            s.append(id, f);
        }
        assert_eq!(s.trim(TrimStrategy::MaxLen(180), true, 10_000), 0);
        assert_eq!(s.trim(TrimStrategy::MaxLen(120), true, 10_000), 100);
        assert_eq!(s.first_id, StreamId::new(101, 0));
        assert_eq!(s.trim(TrimStrategy::MaxLen(10), true, 50), 0);
        assert_eq!(
            s.trim(TrimStrategy::MinId(StreamId::new(230, 0)), true, 0),
            100
        );
        assert_eq!(s.len(), 50);
        assert_eq!(s.max_deleted_entry_id, StreamId::MIN);
    }

    #[test]
    fn exact_trimming_leaves_tombstones_in_the_head_node() {
        let mut s = Stream::new();
        for i in 1..=250 {
            let (id, f) = small(i);
            s.append(id, f);
        }
        assert_eq!(s.trim(TrimStrategy::MaxLen(120), false, 0), 130);
        assert_eq!(s.first_id, StreamId::new(131, 0));
        assert_eq!(s.node_count(), 2);
        assert_eq!(s.first_id_with_tombstones(), StreamId::new(101, 0));
        assert_eq!(
            s.trim(TrimStrategy::MinId(StreamId::new(240, 0)), false, 0),
            109
        );
        assert_eq!(s.first().map(|(id, _)| id), Some(StreamId::new(240, 0)));
        // A node whose live entries are all gone by trimming stays until a
        // later trim removes it.
        let mut t = Stream::new();
        for i in 1..=3 {
            let (id, f) = small(i);
            t.append(id, f);
        }
        assert!(t.remove(StreamId::new(3, 0)));
        assert_eq!(
            t.trim(TrimStrategy::MinId(StreamId::new(3, 0)), false, 0),
            2
        );
        assert_eq!((t.len(), t.node_count()), (0, 1));
        assert_eq!(t.first_id, StreamId::MIN);
        assert_eq!(t.trim(TrimStrategy::MaxLen(0), false, 0), 0);
    }

    #[test]
    fn next_id_follows_streamappenditem() {
        let mut s = Stream::new();
        assert_eq!(s.next_id(None, false, 5), Some(StreamId::new(5, 0)));
        s.append(StreamId::new(5, 3), fields(&[("f", "v")]));
        assert_eq!(s.next_id(None, false, 4), Some(StreamId::new(5, 4)));
        assert_eq!(
            s.next_id(Some(StreamId::new(5, 0)), false, 0),
            Some(StreamId::new(5, 4))
        );
        assert_eq!(s.next_id(Some(StreamId::new(4, 0)), false, 0), None);
        assert_eq!(
            s.next_id(Some(StreamId::new(7, 0)), false, 0),
            Some(StreamId::new(7, 0))
        );
        assert_eq!(s.next_id(Some(StreamId::new(5, 3)), true, 0), None);
        s.last_id = StreamId::new(9, u64::MAX);
        assert_eq!(s.next_id(Some(StreamId::new(9, 0)), false, 0), None);
        assert_eq!(s.next_id(None, false, 0), Some(StreamId::new(10, 0)));
        s.last_id = StreamId::MAX;
        assert_eq!(s.next_id(None, false, 0), None);
    }
}
