//! The shared replication buffer and the backlog (docs/replication.md,
//! "The shared buffer and the backlog"): Redis 7.0's design, where the
//! backlog and every replica's pending stream output are cursors into one
//! list of blocks, so each stream byte is stored once however many replicas
//! there are.
//!
//! # Offsets
//!
//! Offsets are Redis's (docs/replication.md, "Terms" and "The PSYNC
//! decision"): stream bytes are numbered from 1, so the first byte after
//! offset `X` is `X + 1`, and `master_repl_offset` is the offset of the
//! last byte produced (the number of bytes produced when the history began
//! at 0). A block records the offset of its first byte. The backlog holds
//! the bytes `first_byte_offset ..= master_repl_offset`, `histlen` of them;
//! empty, its first byte offset is `master_repl_offset + 1`. A replica's
//! cursor is the offset of the next byte it still has to be sent, which is
//! what `PSYNC <id> <offset>` asks for: a cursor at `master_repl_offset + 1`
//! is caught up.
//!
//! # Rules
//!
//! - New bytes go to the last block while it has room; a new block has
//!   `max(len, 16 KiB)` bytes of room (`len` what is left to store), at most
//!   `max(repl-backlog-size / 16, 16 KiB)`. So every block but the last is
//!   full.
//! - The backlog is every block: replica cursors are never behind its first
//!   byte, because a block a cursor is in is never dropped.
//! - A cursor is *in* the last block whose first byte is at or before it: the
//!   block holding its next byte, or the last block when it is caught up.
//! - Trimming is Redis's `incrementalTrimReplicationBacklog`: while the
//!   backlog is longer than `repl-backlog-size` and has more than one block,
//!   the first block goes if no cursor is in it and the backlog keeps *more*
//!   than `repl-backlog-size` bytes without it; at most
//!   [`TRIM_BLOCKS_PER_CALL`] blocks per call. Appending trims when it adds a
//!   block; a cursor leaving the first block and a detached cursor trim too
//!   (Redis's `feedReplicationBuffer`, `writeToClient`,
//!   `freeReplicaReferencedReplBuffer`). So the backlog can exceed the
//!   setting by a block, or by whatever a slow replica still needs, and
//!   PSYNC is served from all of it.

use std::collections::{BTreeMap, VecDeque};

/// The smallest room a new block gets (Redis's `PROTO_REPLY_CHUNK_BYTES`).
pub const BLOCK_MIN: usize = 16 * 1024;

/// The smallest `repl-backlog-size` (Redis's
/// `CONFIG_REPL_BACKLOG_MIN_SIZE`); smaller settings are raised to it.
pub const BACKLOG_SIZE_MIN: usize = 16 * 1024;

/// The most blocks one trim drops (Redis's
/// `REPL_BACKLOG_TRIM_BLOCKS_PER_CALL`), so that freeing a replica that held
/// many blocks does not stall the event loop.
pub const TRIM_BLOCKS_PER_CALL: usize = 64;

/// One block of stream bytes.
#[derive(Debug)]
struct Block {
    /// The offset of the block's first byte.
    start: i64,
    /// The bytes; never more than `room`.
    data: Vec<u8>,
    /// The bytes the block was created for (Redis's `size`).
    room: usize,
}

impl Block {
    /// The offset just after the block's last byte.
    fn end(&self) -> i64 {
        self.start + len_i64(self.data.len())
    }
}

/// A replica's cursor: the handle [`ReplBuffer::attach`] returns. It is
/// neither `Clone` nor `Copy`, so that it is detached exactly once.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CursorId(u64);

/// The shared replication buffer: the stream bytes the backlog and the
/// replicas still hold, `master_repl_offset`, and the replica cursors.
#[derive(Debug)]
pub struct ReplBuffer {
    blocks: VecDeque<Block>,
    master_repl_offset: i64,
    backlog_size: usize,
    /// Each replica's next offset to send, by cursor id.
    cursors: BTreeMap<u64, i64>,
    next_cursor: u64,
    /// The sum of the blocks' `room`.
    memory: usize,
}

impl ReplBuffer {
    /// A new, empty backlog after `master_repl_offset` (its first byte
    /// offset is `master_repl_offset + 1`), keeping at least `backlog_size`
    /// bytes (raised to [`BACKLOG_SIZE_MIN`]).
    pub fn new(master_repl_offset: i64, backlog_size: usize) -> ReplBuffer {
        ReplBuffer {
            blocks: VecDeque::new(),
            master_repl_offset,
            backlog_size: backlog_size.max(BACKLOG_SIZE_MIN),
            cursors: BTreeMap::new(),
            next_cursor: 0,
            memory: 0,
        }
    }

    /// The offset of the last stream byte (`master_repl_offset`).
    pub fn master_repl_offset(&self) -> i64 {
        self.master_repl_offset
    }

    /// The offset of the backlog's first byte
    /// (`repl_backlog_first_byte_offset`); `master_repl_offset + 1` when
    /// the backlog is empty.
    pub fn backlog_first_byte_offset(&self) -> i64 {
        self.blocks
            .front()
            .map_or(self.master_repl_offset + 1, |b| b.start)
    }

    /// The bytes the backlog holds (`repl_backlog_histlen`).
    pub fn backlog_histlen(&self) -> usize {
        span(
            self.backlog_first_byte_offset(),
            self.master_repl_offset + 1,
        )
    }

    /// The `repl-backlog-size` in effect.
    pub fn backlog_size(&self) -> usize {
        self.backlog_size
    }

    /// Sets `repl-backlog-size` (raised to [`BACKLOG_SIZE_MIN`]). It applies
    /// at the next trim ([`ReplBuffer::trim`], or the next append that adds
    /// a block), and sizes blocks created from now on; a larger setting
    /// does not bring back bytes already dropped. Redis's CONFIG SET runs
    /// one trim at once (`resizeReplicationBacklog`): the caller does the
    /// same with [`ReplBuffer::trim`].
    pub fn set_backlog_size(&mut self, backlog_size: usize) {
        self.backlog_size = backlog_size.max(BACKLOG_SIZE_MIN);
    }

    /// The most room a new block gets: `max(repl-backlog-size / 16, 16
    /// KiB)`, so that a block a replica still needs a little of is not huge.
    pub fn block_limit(&self) -> usize {
        (self.backlog_size / 16).max(BLOCK_MIN)
    }

    /// Appends stream bytes: `master_repl_offset` advances by their length.
    /// Trims ([`ReplBuffer::trim`]) when a block was added.
    pub fn append(&mut self, mut bytes: &[u8]) {
        self.master_repl_offset += len_i64(bytes.len());
        let mut added = false;
        if let Some(tail) = self.blocks.back_mut() {
            let copy = (tail.room - tail.data.len()).min(bytes.len());
            tail.data.extend_from_slice(&bytes[..copy]);
            bytes = &bytes[copy..];
        }
        while !bytes.is_empty() {
            let room = bytes.len().max(BLOCK_MIN).min(self.block_limit());
            let start = self.master_repl_offset + 1 - len_i64(bytes.len());
            let copy = room.min(bytes.len());
            let mut data = Vec::with_capacity(room);
            data.extend_from_slice(&bytes[..copy]);
            self.blocks.push_back(Block { start, data, room });
            self.memory += room;
            bytes = &bytes[copy..];
            added = true;
        }
        if added {
            self.trim();
        }
    }

    /// Drops blocks from the front as Redis's
    /// `incrementalTrimReplicationBacklog` does (see the module's "Rules"),
    /// at most [`TRIM_BLOCKS_PER_CALL`]; returns how many went.
    pub fn trim(&mut self) -> usize {
        let lowest_cursor = self.cursors.values().min().copied();
        let mut dropped = 0;
        while dropped < TRIM_BLOCKS_PER_CALL
            && self.backlog_histlen() > self.backlog_size
            && self.blocks.len() > 1
        {
            let first = &self.blocks[0];
            // A cursor at the first block's end is in the second block.
            if lowest_cursor.is_some_and(|c| c < first.end()) {
                break;
            }
            if self.backlog_histlen() - first.data.len() <= self.backlog_size {
                break;
            }
            self.memory -= first.room;
            self.blocks.pop_front();
            dropped += 1;
        }
        dropped
    }

    /// Creates a replica cursor at `offset`, the next byte to send it, if
    /// the backlog can serve it: `backlog_first_byte_offset ..=
    /// master_repl_offset + 1` (PSYNC's rule; `master_repl_offset + 1`
    /// sends nothing from the backlog). `None` otherwise: the replica needs
    /// a full sync. A full sync attaches at `master_repl_offset + 1` at the
    /// capture instant ([`ReplBuffer::attach_at_end`]).
    pub fn attach(&mut self, offset: i64) -> Option<CursorId> {
        if offset < self.backlog_first_byte_offset() || offset > self.master_repl_offset + 1 {
            return None;
        }
        let id = self.next_cursor;
        self.next_cursor += 1;
        self.cursors.insert(id, offset);
        Some(CursorId(id))
    }

    /// Creates a caught-up replica cursor (at `master_repl_offset + 1`):
    /// the stream after a full sync's capture instant.
    pub fn attach_at_end(&mut self) -> CursorId {
        let id = self.next_cursor;
        self.next_cursor += 1;
        self.cursors.insert(id, self.master_repl_offset + 1);
        CursorId(id)
    }

    /// Removes a replica's cursor: the blocks it held become trimmable, and
    /// a trim runs.
    pub fn detach(&mut self, cursor: CursorId) {
        self.cursors.remove(&cursor.0);
        self.trim();
    }

    /// How many replica cursors there are.
    pub fn replica_count(&self) -> usize {
        self.cursors.len()
    }

    /// The next offset `cursor` has to be sent.
    ///
    /// # Panics
    ///
    /// If `cursor` is not this buffer's (every method taking a cursor).
    pub fn cursor_offset(&self, cursor: &CursorId) -> i64 {
        match self.cursors.get(&cursor.0) {
            Some(&offset) => offset,
            None => panic!("replication buffer: unknown cursor {}", cursor.0),
        }
    }

    /// The stream bytes `cursor` has not been sent yet.
    pub fn pending(&self, cursor: &CursorId) -> usize {
        span(self.cursor_offset(cursor), self.master_repl_offset + 1)
    }

    /// The next contiguous bytes to send `cursor`: from its offset to the
    /// end of the block holding it; empty when it is caught up. Write them
    /// (a non-blocking write may take only part), then
    /// [`ReplBuffer::advance`] by what was written.
    pub fn chunk(&self, cursor: &CursorId) -> &[u8] {
        let offset = self.cursor_offset(cursor);
        match self.block_index(offset) {
            Some(i) => {
                let block = &self.blocks[i];
                &block.data[span(block.start, offset)..]
            }
            None => &[],
        }
    }

    /// Every byte `cursor` has not been sent yet, as the blocks' slices in
    /// order (for a vectored write); none empty.
    pub fn chunks<'a>(&'a self, cursor: &CursorId) -> impl Iterator<Item = &'a [u8]> + 'a {
        let offset = self.cursor_offset(cursor);
        let first = self.block_index(offset);
        let skip = first.map_or(0, |i| span(self.blocks[i].start, offset));
        self.blocks
            .range(first.unwrap_or(self.blocks.len())..)
            .enumerate()
            .map(move |(n, b)| if n == 0 { &b.data[skip..] } else { &b.data[..] })
            .filter(|s| !s.is_empty())
    }

    /// Moves `cursor` on by `written` bytes (what a socket write took).
    /// When it leaves the backlog's first block, a trim runs.
    ///
    /// # Panics
    ///
    /// If `written` is more than [`ReplBuffer::pending`].
    pub fn advance(&mut self, cursor: &CursorId, written: usize) {
        let pending = self.pending(cursor);
        assert!(
            written <= pending,
            "replication buffer: advancing by {written} bytes, {pending} pending"
        );
        let old = self.cursor_offset(cursor);
        let new = old + len_i64(written);
        self.cursors.insert(cursor.0, new);
        if self
            .blocks
            .front()
            .is_some_and(|b| old < b.end() && new >= b.end())
        {
            self.trim();
        }
    }

    /// What `cursor` counts against `client-output-buffer-limit replica`:
    /// the stream bytes from the start of the block holding it to the end
    /// of the stream (Redis 7.0 counts from the same block); 0 when there
    /// are no blocks. The server adds the replica's private output.
    pub fn output_usage(&self, cursor: &CursorId) -> usize {
        let offset = self.cursor_offset(cursor);
        match self.block_index(offset) {
            Some(i) => span(self.blocks[i].start, self.master_repl_offset + 1),
            None => 0,
        }
    }

    /// The memory of every block (INFO's `mem_total_replication_buffers`):
    /// the room they were created with.
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// The backlog's share of [`ReplBuffer::memory`] (INFO's
    /// `mem_replication_backlog`), as Redis 7.0 splits it: with replica
    /// cursors and more memory than `repl-backlog-size`, the setting (the
    /// rest counts as the replicas'); otherwise all of it.
    pub fn backlog_memory(&self) -> usize {
        if !self.cursors.is_empty() && self.memory > self.backlog_size {
            self.backlog_size
        } else {
            self.memory
        }
    }

    /// The number of blocks.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The index of the block `offset` is in: the last block whose first
    /// byte is at or before it; `None` when there is none (no blocks).
    fn block_index(&self, offset: i64) -> Option<usize> {
        self.blocks
            .partition_point(|b| b.start <= offset)
            .checked_sub(1)
    }
}

/// The number of offsets in `from..to` (`from <= to`).
fn span(from: i64, to: i64) -> usize {
    debug_assert!(from <= to, "span {from}..{to}");
    usize::try_from(to - from).unwrap_or(0)
}

/// A length as an offset difference.
fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::{fairness, Rng};

    const K16: usize = 16 * 1024;

    /// `len` bytes of a pattern that differs from block to block.
    fn pattern(len: usize, salt: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add((i / 251) as u8) ^ salt)
            .collect()
    }

    fn rooms(b: &ReplBuffer) -> Vec<usize> {
        b.blocks.iter().map(|b| b.room).collect()
    }

    /// Everything `cursor` has pending, through `chunks`.
    fn pending_bytes(b: &ReplBuffer, cursor: &CursorId) -> Vec<u8> {
        b.chunks(cursor).flatten().copied().collect()
    }

    #[test]
    fn blocks_are_sized_as_redis_sizes_them() {
        let mut b = ReplBuffer::new(0, 1 << 20);
        assert_eq!(b.block_limit(), 64 * 1024);
        b.append(&pattern(10, 0));
        assert_eq!(rooms(&b), [K16]);
        // The tail is filled first, then the rest in blocks of at most the
        // limit, the last one as large as what is left.
        b.append(&pattern(100_000, 1));
        assert_eq!(rooms(&b), [K16, 64 * 1024, 100_010 - K16 - 64 * 1024]);
        assert_eq!(b.memory(), 100_010);
        // A full tail: a new block of at least 16 KiB.
        b.append(b"x");
        assert_eq!(rooms(&b), [K16, 64 * 1024, 18_090, K16]);
        assert_eq!(b.backlog_histlen(), 100_011);
        assert_eq!(b.master_repl_offset(), 100_011);

        // The smallest backlog: blocks of 16 KiB.
        let mut b = ReplBuffer::new(0, 1000);
        assert_eq!(b.backlog_size(), BACKLOG_SIZE_MIN);
        assert_eq!(b.block_limit(), K16);
        let c = b.attach(1).unwrap();
        b.append(&pattern(100_000, 2));
        assert_eq!(rooms(&b), [K16; 7]);
        assert_eq!(b.chunk(&c).len(), K16);

        // A large backlog: blocks up to a sixteenth of it.
        let mut b = ReplBuffer::new(0, 100 << 20);
        b.append(&pattern(7_000_000, 3));
        assert_eq!(rooms(&b), [6_553_600, 7_000_000 - 6_553_600]);
        b.append(&pattern(10, 3));
        assert_eq!(rooms(&b), [6_553_600, 7_000_000 - 6_553_600, K16]);
        assert_eq!(b.backlog_histlen(), 7_000_010);
    }

    #[test]
    fn trimming_keeps_more_than_the_setting() {
        let mut b = ReplBuffer::new(0, K16);
        b.append(&pattern(5 * K16, 0));
        // Five blocks; the first goes while more than 16 KiB stay without
        // it: exactly 16 KiB is not more, so two blocks stay.
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.backlog_histlen(), 2 * K16);
        assert_eq!(b.backlog_first_byte_offset(), 3 * K16 as i64 + 1);
        assert_eq!(b.trim(), 0);
        // One more byte makes a block; now the first can go.
        b.append(b"y");
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.backlog_histlen(), K16 + 1);
        assert_eq!(b.backlog_first_byte_offset(), 4 * K16 as i64 + 1);
        // Bytes that fit the tail add no block and trim nothing.
        b.append(&pattern(K16 - 1, 1));
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.backlog_histlen(), 2 * K16);
        // Never fewer than one block, however large the setting is exceeded.
        let mut b = ReplBuffer::new(0, K16);
        b.append(&pattern(K16 + 1, 0));
        b.set_backlog_size(0);
        assert_eq!(b.trim(), 0);
        assert_eq!(b.block_count(), 2);
    }

    #[test]
    fn replica_cursors_hold_their_blocks() {
        let mut b = ReplBuffer::new(0, K16);
        let c = b.attach(1).unwrap();
        b.append(&pattern(5 * K16, 0));
        assert_eq!(b.block_count(), 5);
        b.advance(&c, K16 - 1);
        assert_eq!(b.block_count(), 5);
        // At the first block's end the cursor is in the second block.
        b.advance(&c, 1);
        assert_eq!(b.block_count(), 4);
        assert_eq!(b.backlog_first_byte_offset(), K16 as i64 + 1);
        // Leaving two blocks drops both.
        b.advance(&c, 2 * K16);
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.backlog_first_byte_offset(), 3 * K16 as i64 + 1);
        b.detach(c);
        assert_eq!(b.block_count(), 2);

        // The lowest cursor decides; a detached cursor frees its blocks.
        let mut b = ReplBuffer::new(0, K16);
        let slow = b.attach(1).unwrap();
        let fast = b.attach(1).unwrap();
        b.append(&pattern(4 * K16, 1));
        b.advance(&fast, 4 * K16);
        assert_eq!(b.block_count(), 4);
        assert_eq!(b.pending(&fast), 0);
        b.advance(&slow, K16 + 5);
        assert_eq!(b.block_count(), 3);
        assert_eq!(b.replica_count(), 2);
        b.detach(slow);
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.replica_count(), 1);
        // A caught-up cursor holds the bytes that arrive next.
        b.append(&pattern(3 * K16, 2));
        assert_eq!(b.block_count(), 3);
        assert_eq!(b.cursor_offset(&fast), 4 * K16 as i64 + 1);
        assert_eq!(b.backlog_first_byte_offset(), 4 * K16 as i64 + 1);
        b.advance(&fast, 3 * K16);
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.backlog_first_byte_offset(), 5 * K16 as i64 + 1);
    }

    #[test]
    fn one_trim_drops_at_most_64_blocks() {
        let mut b = ReplBuffer::new(0, K16);
        let c = b.attach(1).unwrap();
        b.append(&pattern(100 * K16, 0));
        assert_eq!(b.block_count(), 100);
        b.detach(c);
        assert_eq!(b.block_count(), 100 - TRIM_BLOCKS_PER_CALL);
        assert_eq!(b.trim(), 34);
        assert_eq!(b.block_count(), 2);
        assert_eq!(b.trim(), 0);
        assert_eq!(b.memory(), 2 * K16);
    }

    #[test]
    fn psync_is_served_at_every_boundary_of_the_backlog() {
        // An empty backlog serves exactly `master_repl_offset + 1`.
        let mut b = ReplBuffer::new(1000, K16);
        assert_eq!(b.backlog_first_byte_offset(), 1001);
        assert_eq!(b.backlog_histlen(), 0);
        assert!(b.attach(1000).is_none());
        assert!(b.attach(1002).is_none());
        let c = b.attach(1001).unwrap();
        assert_eq!(b.pending(&c), 0);
        assert!(b.chunk(&c).is_empty());
        assert_eq!(b.chunks(&c).count(), 0);
        assert_eq!(b.output_usage(&c), 0);
        b.detach(c);

        let data = pattern(3 * K16 + 100, 7);
        b.append(&data);
        // Four blocks, two dropped: 16 KiB + 100 bytes stay.
        let (first, last) = (b.backlog_first_byte_offset(), b.master_repl_offset());
        assert_eq!(first, 1001 + 2 * K16 as i64);
        assert_eq!(last, 1000 + data.len() as i64);
        assert_eq!(b.backlog_histlen(), K16 + 100);
        let boundary = first + K16 as i64;
        let mut offsets: Vec<i64> = Vec::new();
        for at in [first, boundary, last] {
            offsets.extend(at - 2..=at + 3);
        }
        for offset in offsets {
            let served = first <= offset && offset <= last + 1;
            match b.attach(offset) {
                Some(c) => {
                    assert!(served, "{offset} served");
                    assert_eq!(b.cursor_offset(&c), offset);
                    let from = usize::try_from(offset - 1001).unwrap();
                    assert_eq!(pending_bytes(&b, &c), data[from..], "{offset}");
                    assert_eq!(b.pending(&c), data.len() - from);
                    let chunk_end = if offset < boundary {
                        usize::try_from(boundary - 1001).unwrap()
                    } else {
                        data.len()
                    };
                    assert_eq!(b.chunk(&c), &data[from..chunk_end], "{offset}");
                    b.detach(c);
                }
                None => assert!(!served, "{offset} refused"),
            }
            assert_eq!(b.backlog_first_byte_offset(), first);
        }
    }

    #[test]
    fn output_usage_counts_from_the_start_of_the_cursor_block() {
        let mut b = ReplBuffer::new(0, 1 << 20);
        b.append(&pattern(K16, 0));
        b.append(&pattern(20_000, 1));
        b.append(&pattern(5, 2));
        assert_eq!(rooms(&b), [K16, 20_000, K16]);
        let end = b.master_repl_offset();
        assert_eq!(end, (K16 + 20_005) as i64);
        let total = K16 + 20_005;
        for (offset, usage) in [
            (1, total),
            (K16 as i64, total),
            (K16 as i64 + 1, 20_005),
            (end - 5, 20_005),
            (end - 4, 5),
            (end, 5),
            (end + 1, 5),
        ] {
            let c = b.attach(offset).unwrap();
            assert_eq!(b.output_usage(&c), usage, "{offset}");
            b.detach(c);
        }
        let c = b.attach(1).unwrap();
        b.advance(&c, K16);
        assert_eq!(b.output_usage(&c), 20_005);
        b.advance(&c, 20_005);
        assert_eq!(b.output_usage(&c), 5);

        // Caught up at the end of a full last block: that block counts
        // until bytes arrive in the next one.
        let mut b = ReplBuffer::new(0, K16);
        b.append(&pattern(K16, 0));
        let c = b.attach_at_end();
        assert_eq!(b.output_usage(&c), K16);
        b.append(b"z");
        assert_eq!(b.output_usage(&c), 1);
        assert_eq!(b.chunk(&c), b"z");
    }

    #[test]
    fn memory_is_the_blocks_and_the_backlog_share_is_redis_split() {
        let mut b = ReplBuffer::new(0, K16);
        assert_eq!((b.memory(), b.backlog_memory()), (0, 0));
        b.append(b"abc");
        assert_eq!((b.memory(), b.backlog_memory()), (K16, K16));
        let c = b.attach_at_end();
        b.append(&pattern(4 * K16, 0));
        assert_eq!(b.block_count(), 5);
        assert_eq!(b.memory(), 5 * K16);
        // With a replica, the backlog's share is the setting, the rest the
        // replica's.
        assert_eq!(b.backlog_memory(), K16);
        b.detach(c);
        assert_eq!(b.block_count(), 2);
        assert_eq!((b.memory(), b.backlog_memory()), (2 * K16, 2 * K16));
    }

    #[test]
    fn a_new_backlog_size_applies_at_the_next_trim() {
        let mut b = ReplBuffer::new(0, 1 << 20);
        b.append(&pattern(1 << 20, 0));
        assert_eq!(b.block_count(), 16);
        b.set_backlog_size(K16);
        assert_eq!(b.block_count(), 16);
        assert_eq!(b.block_limit(), K16);
        assert_eq!(b.trim(), 15);
        assert_eq!(b.backlog_histlen(), 64 * 1024);
        b.append(b"w");
        assert_eq!(rooms(&b), [64 * 1024, K16]);
        // A larger setting keeps more from now on; it does not bring back
        // what went.
        b.set_backlog_size(1 << 20);
        assert_eq!(b.backlog_histlen(), 64 * 1024 + 1);
        assert_eq!(b.trim(), 0);
        b.set_backlog_size(10);
        assert_eq!(b.backlog_size(), BACKLOG_SIZE_MIN);
    }

    #[test]
    fn partial_writes_advance_through_the_blocks() {
        let mut b = ReplBuffer::new(41, K16);
        let c = b.attach_at_end();
        assert_eq!(b.cursor_offset(&c), 42);
        let data = pattern(3 * K16 + 777, 9);
        b.append(&data);
        assert_eq!(
            b.chunks(&c).map(<[u8]>::len).collect::<Vec<_>>(),
            [K16, K16, K16, 777]
        );
        let mut sent = Vec::new();
        let mut step = 1;
        while b.pending(&c) > 0 {
            let chunk = b.chunk(&c);
            assert!(!chunk.is_empty());
            let n = chunk.len().min(step);
            sent.extend_from_slice(&chunk[..n]);
            b.advance(&c, n);
            step = step * 3 + 1;
        }
        assert_eq!(sent, data);
        assert_eq!(b.cursor_offset(&c), 42 + data.len() as i64);
        b.advance(&c, 0);
        assert_eq!(b.block_count(), 2);
    }

    #[test]
    #[should_panic(expected = "advancing by 2 bytes, 1 pending")]
    fn advancing_past_the_stream_panics() {
        let mut b = ReplBuffer::new(0, K16);
        let c = b.attach_at_end();
        b.append(b"a");
        b.advance(&c, 2);
    }

    /// The model: every byte ever appended, each cursor's offset, and the
    /// least the backlog must still hold.
    struct Model {
        /// `master_repl_offset` when the buffer was created.
        base: i64,
        bytes: Vec<u8>,
        cursors: Vec<(CursorId, i64)>,
        /// The backlog never holds less: what was appended, capped by each
        /// setting in effect since.
        floor: usize,
    }

    impl Model {
        fn at(&self, offset: i64) -> usize {
            usize::try_from(offset - self.base - 1).unwrap()
        }
    }

    /// Every structural rule and every stored byte against the model.
    fn check(b: &ReplBuffer, m: &Model, bytes_too: bool) {
        let end = m.base + m.bytes.len() as i64;
        assert_eq!(b.master_repl_offset(), end);
        assert!(
            b.backlog_histlen() >= m.floor,
            "histlen {} < {}",
            b.backlog_histlen(),
            m.floor
        );
        assert!(b.backlog_histlen() <= m.bytes.len());
        assert_eq!(
            b.backlog_first_byte_offset() + b.backlog_histlen() as i64,
            end + 1
        );
        let mut next = b.backlog_first_byte_offset();
        for (i, block) in b.blocks.iter().enumerate() {
            assert_eq!(block.start, next);
            assert!(block.room >= BLOCK_MIN && block.data.len() <= block.room);
            assert!(!block.data.is_empty());
            if i + 1 < b.blocks.len() {
                assert_eq!(block.data.len(), block.room, "a full block");
            }
            if bytes_too {
                let from = m.at(block.start);
                assert_eq!(block.data, m.bytes[from..from + block.data.len()]);
            }
            next = block.end();
        }
        assert_eq!(b.memory(), b.blocks.iter().map(|b| b.room).sum::<usize>());
        assert_eq!(b.replica_count(), m.cursors.len());
        for (c, offset) in &m.cursors {
            assert_eq!(b.cursor_offset(c), *offset);
            assert!(*offset >= b.backlog_first_byte_offset());
            assert_eq!(b.pending(c), m.bytes.len() - (m.at(*offset)));
        }
    }

    fn run_against_model(rng: &mut Rng) {
        let base = i64::try_from(rng.below(1 << 40)).unwrap();
        let sizes = [K16, 20_000, 50_000, 100_000, 300_000];
        let mut b = ReplBuffer::new(base, sizes[rng.index(sizes.len())]);
        let mut m = Model {
            base,
            bytes: Vec::new(),
            cursors: Vec::new(),
            floor: 0,
        };
        for step in 0..3000 {
            let mut appended = 0;
            match rng.below(100) {
                0..=34 => {
                    let len = match rng.below(10) {
                        0..=4 => rng.below(200),
                        5..=7 => rng.below(20_000),
                        8 => rng.below(70_000),
                        // Now and then a burst of up to 120 small blocks.
                        _ if rng.below(4) == 0 => rng.below(120 * K16 as u64),
                        _ => 0,
                    } as usize;
                    let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                    b.append(&bytes);
                    m.bytes.extend_from_slice(&bytes);
                    appended = len;
                }
                35..=46 => {
                    let (first, end) = (b.backlog_first_byte_offset(), b.master_repl_offset());
                    let offset = match rng.below(4) {
                        0 => first - 2 + rng.below(4) as i64,
                        1 => end - 1 + rng.below(4) as i64,
                        _ => first - 3 + rng.below((end + 6 - first) as u64) as i64,
                    };
                    let served = first <= offset && offset <= end + 1;
                    match b.attach(offset) {
                        Some(c) => {
                            assert!(served, "{offset} not in {first}..={}", end + 1);
                            let from = m.at(offset);
                            let chunk = b.chunk(&c);
                            assert!(chunk == &m.bytes[from..from + chunk.len()]);
                            if rng.below(8) == 0 {
                                assert!(pending_bytes(&b, &c) == m.bytes[from..]);
                            }
                            m.cursors.push((c, offset));
                        }
                        None => assert!(!served, "{offset} in {first}..={}", end + 1),
                    }
                }
                47..=49 => {
                    let c = b.attach_at_end();
                    m.cursors.push((c, b.master_repl_offset() + 1));
                }
                50..=74 if !m.cursors.is_empty() => {
                    let i = rng.index(m.cursors.len());
                    let pending = b.pending(&m.cursors[i].0);
                    let mut budget = match rng.below(3) {
                        0 => pending,
                        _ => rng.below(pending as u64 + 1) as usize,
                    };
                    while budget > 0 {
                        let (c, offset) = &mut m.cursors[i];
                        let chunk = b.chunk(c);
                        let n = chunk.len().min(budget).min(1 + rng.below(40_000) as usize);
                        let from = usize::try_from(*offset - base - 1).unwrap();
                        assert!(chunk[..n] == m.bytes[from..from + n]);
                        b.advance(c, n);
                        *offset += n as i64;
                        budget -= n;
                    }
                }
                75..=87 if !m.cursors.is_empty() => {
                    let i = rng.index(m.cursors.len());
                    let (c, _) = m.cursors.swap_remove(i);
                    b.detach(c);
                }
                88..=92 => {
                    let size = rng.below(300_000) as usize;
                    b.set_backlog_size(size);
                    assert_eq!(b.backlog_size(), size.max(BACKLOG_SIZE_MIN));
                }
                93..=99 => {
                    let dropped = b.trim();
                    assert!(dropped <= TRIM_BLOCKS_PER_CALL);
                    if dropped < TRIM_BLOCKS_PER_CALL && b.block_count() > 1 {
                        // Stopped for one of Redis's reasons.
                        let first = &b.blocks[0];
                        let held = m.cursors.iter().any(|(_, o)| *o < first.end());
                        assert!(held || b.backlog_histlen() - first.data.len() <= b.backlog_size());
                    }
                }
                _ => {}
            }
            // A few replicas at a time, so that the backlog is trimmed too.
            if m.cursors.len() > 4 {
                let (c, _) = m.cursors.swap_remove(rng.index(m.cursors.len()));
                b.detach(c);
            }
            m.floor = (m.floor + appended).min(b.backlog_size());
            check(&b, &m, step % 64 == 0);
        }
        check(&b, &m, true);
        for (c, offset) in m.cursors.drain(..) {
            assert!(
                pending_bytes(&b, &c) == m.bytes[usize::try_from(offset - base - 1).unwrap()..]
            );
            b.detach(c);
        }
    }

    #[test]
    fn matches_a_model_of_every_byte() {
        let seed = fairness::seed("repl::buffer::tests::matches_a_model_of_every_byte");
        for run in 0..24 {
            run_against_model(&mut seed.rng(run));
        }
    }
}
