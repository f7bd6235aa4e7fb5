//! The list type.
//!
//! Redis 7.0 stores every list as a quicklist (a deque of listpacks of about
//! 8 KB each) and OBJECT ENCODING always reports `quicklist`, so there is no
//! compact/general switch to mirror. What matters is what Redis's layout
//! buys: queues are fast at both ends, and an element costs its bytes plus
//! two or three, not a pointer-sized slot and a heap block.
//!
//! [`List`] has the same shape: a deque of chunks, each a byte buffer of
//! at most [`CHUNK_BYTES_MAX`] holding entries back to back. An entry is its
//! length as a LEB128 varint, the bytes, then the same varint bytes in
//! reverse order, so it can be read from either end (like a listpack's
//! `backlen`): `"job"` costs 5 bytes. A chunk keeps free space at both ends,
//! so pushing or popping at either end of the list is amortized O(1) with
//! no allocation, where a listpack moves its whole body for every push at
//! its head.
//!
//! Invariants: no chunk is empty; `len` is the sum of the chunks' counts; a
//! chunk holds more than [`CHUNK_BYTES_MAX`] bytes only when it holds one
//! element.

use std::collections::VecDeque;
use std::fmt;

use super::Blob;

/// Most bytes of entries a chunk holds (Redis's default node size,
/// `list-max-listpack-size -2`). A larger element gets a chunk of its own.
pub const CHUNK_BYTES_MAX: usize = 8192;

/// Smallest buffer a chunk allocates (small lists grow from here).
const CHUNK_CAPACITY_MIN: usize = 16;

/// One end of a list: `LEFT` (head, index 0) or `RIGHT` (tail, index -1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The head (LPUSH, LPOP, `LEFT`).
    Head,
    /// The tail (RPUSH, RPOP, `RIGHT`).
    Tail,
}

impl End {
    /// The word Redis propagates for this end (`left` / `right`, lower
    /// case, as its shared objects spell them).
    pub fn word(self) -> &'static [u8] {
        match self {
            End::Head => b"left",
            End::Tail => b"right",
        }
    }
}

/// A list of byte strings. Redis 7.0 always reports `quicklist`.
#[derive(Clone, Default)]
pub struct List {
    /// Runs of packed entries, head first; none is empty.
    chunks: VecDeque<Chunk>,
    /// Number of elements.
    len: usize,
}

impl List {
    /// An empty list.
    pub fn new() -> List {
        List::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty (an empty list is never stored under a key).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// OBJECT ENCODING.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Bytes this list holds on the heap (buffers and chunk table).
    pub fn heap_bytes(&self) -> usize {
        let buffers: usize = self.chunks.iter().map(|c| c.buf.len()).sum();
        buffers + self.chunks.capacity() * std::mem::size_of::<Chunk>()
    }

    /// Adds `value` at `end`.
    pub fn push(&mut self, end: End, value: &[u8]) {
        let size = entry_size(value.len());
        let has_room = match end {
            End::Head => self.chunks.front(),
            End::Tail => self.chunks.back(),
        }
        .is_some_and(|c| c.used() + size <= CHUNK_BYTES_MAX);
        if !has_room {
            let chunk = Chunk::with_capacity(size.max(CHUNK_CAPACITY_MIN));
            if self.chunks.capacity() == 0 {
                // Most lists are small: one chunk slot, not VecDeque's 4.
                self.chunks.reserve_exact(1);
            }
            match end {
                End::Head => self.chunks.push_front(chunk),
                End::Tail => self.chunks.push_back(chunk),
            }
        }
        let chunk = match end {
            End::Head => self.chunks.front_mut(),
            End::Tail => self.chunks.back_mut(),
        }
        .expect("a chunk exists at this end: found or just added");
        chunk.push(end, value);
        self.len += 1;
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Blob> {
        let chunk = match end {
            End::Head => self.chunks.front_mut(),
            End::Tail => self.chunks.back_mut(),
        }?;
        let (data_start, data_len) = chunk.pop(end);
        let value = Blob::new(&chunk.buf[data_start..data_start + data_len]);
        if chunk.count == 0 {
            match end {
                End::Head => self.chunks.pop_front(),
                End::Tail => self.chunks.pop_back(),
            };
        }
        self.len -= 1;
        Some(value)
    }

    /// The element at zero-based position `index` from the head.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (c, i) = self.locate(index);
        let chunk = &self.chunks[c];
        let entry = chunk.entry(i);
        Some(&chunk.buf[entry.data_start..entry.data_start + entry.data_len])
    }

    /// Replaces the element at `index`; false when out of range.
    pub fn set(&mut self, index: usize, value: &[u8]) -> bool {
        if index >= self.len {
            return false;
        }
        let (c, i) = self.locate(index);
        let entry = self.chunks[c].entry(i);
        self.chunks[c].splice(entry.start, entry.end, Some(value));
        self.split_if_oversized(c);
        true
    }

    /// Inserts `value` so that it ends up at position `index` (`index ==
    /// len` appends).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        assert!(
            index <= self.len,
            "list insert position {index} beyond the end"
        );
        if index == 0 {
            return self.push(End::Head, value);
        }
        if index == self.len {
            return self.push(End::Tail, value);
        }
        let (c, i) = self.locate(index);
        let at = self.chunks[c].entry(i).start;
        self.chunks[c].splice(at, at, Some(value));
        self.chunks[c].count += 1;
        self.len += 1;
        self.split_if_oversized(c);
    }

    /// Every element, head first (reverse it to walk from the tail).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            chunks: &self.chunks,
            front_chunk: 0,
            front_pos: self.chunks.front().map_or(0, |c| c.start),
            back_chunk: self.chunks.len().saturating_sub(1),
            back_pos: self.chunks.back().map_or(0, |c| c.end),
            remaining: self.len,
        }
    }

    /// The elements at positions `start..=end` (both in range), head first.
    pub fn range(&self, start: usize, end: usize) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        assert!(
            start <= end && end < self.len,
            "list range {start}..={end} outside 0..{}",
            self.len
        );
        let (c, i) = self.locate(start);
        let mut iter = self.iter();
        iter.front_chunk = c;
        iter.front_pos = self.chunks[c].entry(i).start;
        iter.remaining = self.len - start;
        iter.take(end - start + 1)
    }

    /// Position of the first element equal to `value`, from the head.
    pub fn position(&self, value: &[u8]) -> Option<usize> {
        self.iter().position(|item| item == value)
    }

    /// Removes elements equal to `value`: at most `limit` of them (0 = all),
    /// the ones nearest `from` first. Returns how many were removed.
    pub fn remove_matching(&mut self, value: &[u8], limit: usize, from: End) -> usize {
        let limit = if limit == 0 { usize::MAX } else { limit };
        let mut removed = 0;
        let mut doomed: Vec<(usize, usize)> = Vec::new();
        let order: Box<dyn Iterator<Item = usize>> = match from {
            End::Head => Box::new(0..self.chunks.len()),
            End::Tail => Box::new((0..self.chunks.len()).rev()),
        };
        for c in order {
            if removed == limit {
                break;
            }
            let chunk = &mut self.chunks[c];
            doomed.clear();
            chunk.for_each_entry(from, |entry, data| {
                if removed < limit && data == value {
                    doomed.push((entry.start, entry.end));
                    removed += 1;
                }
            });
            if !doomed.is_empty() {
                if from == End::Tail {
                    doomed.reverse();
                }
                chunk.remove_ranges(&doomed);
            }
        }
        if removed > 0 {
            self.len -= removed;
            self.compact();
        }
        removed
    }

    /// Removes `head` elements from the head and `tail` from the tail
    /// (together at most the length).
    pub fn trim(&mut self, head: usize, tail: usize) {
        assert!(
            head + tail <= self.len,
            "list trim of {head}+{tail} beyond the length {}",
            self.len
        );
        for (end, mut n) in [(End::Head, head), (End::Tail, tail)] {
            self.len -= n;
            while n > 0 {
                let chunk = match end {
                    End::Head => self.chunks.front_mut(),
                    End::Tail => self.chunks.back_mut(),
                }
                .expect("elements to trim remain, so chunks do");
                let count = chunk.count as usize;
                if count <= n {
                    n -= count;
                    match end {
                        End::Head => self.chunks.pop_front(),
                        End::Tail => self.chunks.pop_back(),
                    };
                } else {
                    for _ in 0..n {
                        chunk.pop(end);
                    }
                    chunk.shrink_if_sparse();
                    n = 0;
                }
            }
        }
    }

    /// The chunk holding element `index` (< len) and its position there,
    /// walking from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut skipped = 0;
            for (c, chunk) in self.chunks.iter().enumerate() {
                let count = chunk.count as usize;
                if index < skipped + count {
                    return (c, index - skipped);
                }
                skipped += count;
            }
        } else {
            let mut after = self.len;
            for (c, chunk) in self.chunks.iter().enumerate().rev() {
                let count = chunk.count as usize;
                if index >= after - count {
                    return (c, index - (after - count));
                }
                after -= count;
            }
        }
        panic!(
            "list index {index} not within the chunk counts (len {})",
            self.len
        );
    }

    /// Splits chunk `c` in two when an insert or replace made it exceed
    /// [`CHUNK_BYTES_MAX`] (a lone element may).
    fn split_if_oversized(&mut self, c: usize) {
        let chunk = &mut self.chunks[c];
        if chunk.used() <= CHUNK_BYTES_MAX || chunk.count < 2 {
            return;
        }
        let keep = chunk.count / 2;
        let cut = chunk.entry(keep as usize).start;
        let tail = Chunk::from_bytes(&chunk.buf[cut..chunk.end], chunk.count - keep);
        chunk.end = cut;
        chunk.count = keep;
        chunk.shrink_if_sparse();
        self.chunks.insert(c + 1, tail);
        // A large element can leave either half still oversized.
        self.split_if_oversized(c + 1);
        self.split_if_oversized(c);
    }

    /// Drops empty chunks and merges neighbours that fit in one (after
    /// removals in the middle).
    fn compact(&mut self) {
        let mut merged: VecDeque<Chunk> = VecDeque::with_capacity(self.chunks.len());
        for chunk in self.chunks.drain(..) {
            if chunk.count == 0 {
                continue;
            }
            match merged.back_mut() {
                Some(last) if last.used() + chunk.used() <= CHUNK_BYTES_MAX => last.append(&chunk),
                _ => merged.push_back(chunk),
            }
        }
        for chunk in merged.iter_mut() {
            chunk.shrink_if_sparse();
        }
        self.chunks = merged;
    }

    /// Panics unless the invariants hold (tests).
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut total = 0;
        for chunk in &self.chunks {
            assert!(chunk.count > 0, "empty chunk kept");
            assert!(
                chunk.start <= chunk.end && chunk.end <= chunk.buf.len(),
                "chunk bounds"
            );
            assert!(
                chunk.used() <= CHUNK_BYTES_MAX || chunk.count == 1,
                "oversized chunk"
            );
            let mut pos = chunk.start;
            for _ in 0..chunk.count {
                let (data_start, data_len) = read_forward(&chunk.buf, pos);
                pos = data_start + data_len + (data_start - pos);
            }
            assert_eq!(pos, chunk.end, "chunk count does not match its bytes");
            total += chunk.count as usize;
        }
        assert_eq!(total, self.len, "len does not match the chunk counts");
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|b| String::from_utf8_lossy(b)))
            .finish()
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for List {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> List {
        let mut builder = Builder::default();
        for item in iter {
            builder.push(item.as_ref());
        }
        builder.finish()
    }
}

/// Builds a list from its elements, head first, as a load does: each
/// chunk holds what tail pushes would have put in it, in a buffer of
/// exactly its size, written once (pushes grow a chunk a quarter at a
/// time, a new buffer and a copy each time).
#[derive(Default)]
pub struct Builder {
    list: List,
    /// The chunk being filled.
    buf: Vec<u8>,
    count: u32,
}

impl Builder {
    /// Appends `value` at the tail.
    pub fn push(&mut self, value: &[u8]) {
        let size = entry_size(value.len());
        if !self.buf.is_empty() && self.buf.len() + size > CHUNK_BYTES_MAX {
            self.seal();
        }
        let at = self.buf.len();
        self.buf.resize(at + size, 0);
        write_entry(&mut self.buf[at..], value);
        self.count += 1;
    }

    fn seal(&mut self) {
        if self.count == 0 {
            return;
        }
        if self.list.chunks.capacity() == 0 {
            // As push: one chunk slot for a list of one chunk.
            self.list.chunks.reserve_exact(1);
        }
        let chunk = Chunk::from_bytes(&self.buf, self.count);
        self.list.chunks.push_back(chunk);
        self.list.len += self.count as usize;
        self.buf.clear();
        self.count = 0;
    }

    /// The list.
    pub fn finish(mut self) -> List {
        self.seal();
        self.list
    }
}

/// Iterator over a list's elements (see [`List::iter`]).
#[derive(Clone)]
pub struct Iter<'a> {
    chunks: &'a VecDeque<Chunk>,
    front_chunk: usize,
    /// Start of the next entry from the front, in `chunks[front_chunk]`.
    front_pos: usize,
    back_chunk: usize,
    /// End of the next entry from the back, in `chunks[back_chunk]`.
    back_pos: usize,
    /// Elements not yet returned from either end.
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let mut chunk = &self.chunks[self.front_chunk];
        if self.front_pos >= chunk.end {
            self.front_chunk += 1;
            chunk = &self.chunks[self.front_chunk];
            self.front_pos = chunk.start;
        }
        let (data_start, data_len) = read_forward(&chunk.buf, self.front_pos);
        self.front_pos = data_start + data_len + (data_start - self.front_pos);
        self.remaining -= 1;
        Some(&chunk.buf[data_start..data_start + data_len])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let mut chunk = &self.chunks[self.back_chunk];
        if self.back_pos <= chunk.start {
            self.back_chunk -= 1;
            chunk = &self.chunks[self.back_chunk];
            self.back_pos = chunk.end;
        }
        let entry = read_backward(&chunk.buf, self.back_pos);
        self.back_pos = entry.start;
        self.remaining -= 1;
        Some(&chunk.buf[entry.data_start..entry.data_start + entry.data_len])
    }
}

impl ExactSizeIterator for Iter<'_> {}

// ---------------------------------------------------------------------------
// Chunks and the entry encoding.

/// A run of packed entries in `buf[start..end]`, with free space on both
/// sides for pushes at either end.
#[derive(Clone)]
struct Chunk {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Entries in `buf[start..end]`.
    count: u32,
}

/// Where one entry lies in its chunk's buffer.
#[derive(Debug, Clone, Copy)]
struct EntryPos {
    /// First byte of the entry (its header).
    start: usize,
    /// One past its last byte (after the trailer).
    end: usize,
    data_start: usize,
    data_len: usize,
}

impl Chunk {
    fn with_capacity(capacity: usize) -> Chunk {
        Chunk {
            buf: vec![0u8; capacity].into_boxed_slice(),
            start: capacity / 2,
            end: capacity / 2,
            count: 0,
        }
    }

    /// A chunk holding exactly `bytes` (`count` whole entries).
    fn from_bytes(bytes: &[u8], count: u32) -> Chunk {
        Chunk {
            buf: bytes.into(),
            start: 0,
            end: bytes.len(),
            count,
        }
    }

    /// Bytes of entries held.
    fn used(&self) -> usize {
        self.end - self.start
    }

    /// Makes room for `extra` bytes at `side`: moves the entries within the
    /// buffer when it has the space, otherwise grows it (doubling, up to
    /// the chunk size). The free space left over is split between both
    /// ends so alternating pushes do not move the bytes every time.
    fn reserve(&mut self, side: End, extra: usize) {
        let room = match side {
            End::Head => self.start,
            End::Tail => self.buf.len() - self.end,
        };
        if room >= extra {
            return;
        }
        let used = self.used();
        let needed = used + extra;
        let capacity = if needed <= self.buf.len() {
            self.buf.len()
        } else {
            grown_capacity(self.buf.len(), needed)
        };
        let slack = capacity - needed;
        let new_start = match side {
            End::Head => extra + slack - slack / 2,
            End::Tail => slack / 2,
        };
        if capacity == self.buf.len() {
            self.buf.copy_within(self.start..self.end, new_start);
        } else {
            let mut buf = vec![0u8; capacity].into_boxed_slice();
            buf[new_start..new_start + used].copy_from_slice(&self.buf[self.start..self.end]);
            self.buf = buf;
        }
        self.start = new_start;
        self.end = new_start + used;
    }

    fn push(&mut self, side: End, data: &[u8]) {
        let size = entry_size(data.len());
        self.reserve(side, size);
        let at = match side {
            End::Head => {
                self.start -= size;
                self.start
            }
            End::Tail => {
                self.end += size;
                self.end - size
            }
        };
        write_entry(&mut self.buf[at..at + size], data);
        self.count += 1;
    }

    /// Removes the entry at `side` (the chunk must not be empty); returns
    /// where its bytes are, still readable until the next change.
    fn pop(&mut self, side: End) -> (usize, usize) {
        debug_assert!(self.count > 0, "pop from an empty chunk");
        self.count -= 1;
        match side {
            End::Head => {
                let (data_start, data_len) = read_forward(&self.buf, self.start);
                self.start = data_start + data_len + (data_start - self.start);
                (data_start, data_len)
            }
            End::Tail => {
                let entry = read_backward(&self.buf, self.end);
                self.end = entry.start;
                (entry.data_start, entry.data_len)
            }
        }
    }

    /// Entry `i` (< count), walking from the nearer end.
    fn entry(&self, i: usize) -> EntryPos {
        let count = self.count as usize;
        debug_assert!(i < count, "entry {i} of a chunk of {count}");
        if i <= count / 2 {
            let mut pos = self.start;
            for _ in 0..i {
                let (data_start, data_len) = read_forward(&self.buf, pos);
                pos = data_start + data_len + (data_start - pos);
            }
            let (data_start, data_len) = read_forward(&self.buf, pos);
            EntryPos {
                start: pos,
                end: data_start + data_len + (data_start - pos),
                data_start,
                data_len,
            }
        } else {
            let mut end = self.end;
            for _ in 0..count - 1 - i {
                end = read_backward(&self.buf, end).start;
            }
            read_backward(&self.buf, end)
        }
    }

    /// Calls `f` with every entry, starting from `side`.
    fn for_each_entry(&self, side: End, mut f: impl FnMut(EntryPos, &[u8])) {
        match side {
            End::Head => {
                let mut pos = self.start;
                while pos < self.end {
                    let (data_start, data_len) = read_forward(&self.buf, pos);
                    let end = data_start + data_len + (data_start - pos);
                    let entry = EntryPos {
                        start: pos,
                        end,
                        data_start,
                        data_len,
                    };
                    f(entry, &self.buf[data_start..data_start + data_len]);
                    pos = end;
                }
            }
            End::Tail => {
                let mut end = self.end;
                while end > self.start {
                    let entry = read_backward(&self.buf, end);
                    f(
                        entry,
                        &self.buf[entry.data_start..entry.data_start + entry.data_len],
                    );
                    end = entry.start;
                }
            }
        }
    }

    /// Replaces the bytes `buf[from..to]` (whole entries) with one entry
    /// for `value`, or with nothing. The caller adjusts `count`.
    fn splice(&mut self, from: usize, to: usize, value: Option<&[u8]>) {
        let inserted = value.map_or(0, |v| entry_size(v.len()));
        let used = self.used() - (to - from) + inserted;
        let mut buf = vec![0u8; used.max(CHUNK_CAPACITY_MIN)].into_boxed_slice();
        let head = from - self.start;
        buf[..head].copy_from_slice(&self.buf[self.start..from]);
        if let Some(v) = value {
            write_entry(&mut buf[head..head + inserted], v);
        }
        buf[head + inserted..used].copy_from_slice(&self.buf[to..self.end]);
        self.buf = buf;
        self.start = 0;
        self.end = used;
    }

    /// Removes the entries at `ranges` (ascending, disjoint byte ranges of
    /// whole entries), rebuilding the buffer to fit.
    fn remove_ranges(&mut self, ranges: &[(usize, usize)]) {
        let removed_bytes: usize = ranges.iter().map(|(from, to)| to - from).sum();
        let used = self.used() - removed_bytes;
        let mut buf = Vec::with_capacity(used.max(CHUNK_CAPACITY_MIN));
        let mut pos = self.start;
        for &(from, to) in ranges {
            buf.extend_from_slice(&self.buf[pos..from]);
            pos = to;
        }
        buf.extend_from_slice(&self.buf[pos..self.end]);
        buf.resize(buf.capacity(), 0);
        self.buf = buf.into_boxed_slice();
        self.start = 0;
        self.end = used;
        self.count -= ranges.len() as u32;
    }

    /// Appends all of `other`'s entries.
    fn append(&mut self, other: &Chunk) {
        let bytes = &other.buf[other.start..other.end];
        self.reserve(End::Tail, bytes.len());
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
        self.count += other.count;
    }

    /// Gives memory back when at most a quarter of the buffer is in use
    /// (after trims and splits; pops leave it, the chunk soon goes).
    fn shrink_if_sparse(&mut self) {
        let used = self.used();
        if self.buf.len() <= 4 * CHUNK_CAPACITY_MIN || used * 4 > self.buf.len() {
            return;
        }
        let capacity = (used * 2).max(CHUNK_CAPACITY_MIN);
        let start = (capacity - used) / 2;
        let mut buf = vec![0u8; capacity].into_boxed_slice();
        buf[start..start + used].copy_from_slice(&self.buf[self.start..self.end]);
        self.buf = buf;
        self.start = start;
        self.end = start + used;
    }
}

/// The buffer a chunk of `current` bytes grows to when it must hold
/// `needed`: the size class a quarter up, within [`CHUNK_BYTES_MAX`]
/// unless one entry needs more ([`crate::types::size_class::grown`]).
fn grown_capacity(current: usize, needed: usize) -> usize {
    crate::types::size_class::grown(current, needed, CHUNK_BYTES_MAX)
}

/// Bytes of the LEB128 encoding of `n`.
fn varint_len(n: usize) -> usize {
    super::varint::len(n as u64)
}

/// Bytes an entry of `data_len` bytes takes: header, data, trailer.
fn entry_size(data_len: usize) -> usize {
    2 * varint_len(data_len) + data_len
}

/// Writes the entry for `data` into `dst` (exactly its size): the length
/// as LEB128, the data, and the length bytes again in reverse order.
fn write_entry(dst: &mut [u8], data: &[u8]) {
    let header = varint_len(data.len());
    debug_assert_eq!(dst.len(), 2 * header + data.len(), "entry buffer size");
    let mut n = data.len();
    let last = dst.len() - 1;
    for i in 0..header {
        let mut byte = (n & 0x7f) as u8;
        n >>= 7;
        if i + 1 < header {
            byte |= 0x80;
        }
        dst[i] = byte;
        dst[last - i] = byte;
    }
    dst[header..header + data.len()].copy_from_slice(data);
}

/// Reads the entry starting at `pos`: (data start, data length).
fn read_forward(buf: &[u8], pos: usize) -> (usize, usize) {
    let (len, start) = super::varint::read(buf, pos);
    (start, len as usize)
}

/// Reads the entry ending just before `end`.
fn read_backward(buf: &[u8], end: usize) -> EntryPos {
    let mut len = 0usize;
    let mut shift = 0;
    let mut at = end;
    loop {
        at -= 1;
        let byte = buf[at];
        len |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let varint = end - at;
    let data_start = at - len;
    EntryPos {
        start: data_start - varint,
        end,
        data_start,
        data_len: len,
    }
}

#[cfg(test)]
mod tests;
