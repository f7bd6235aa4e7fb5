//! Unit tests of [`super::List`].

use super::*;
use quickcheck::{Arbitrary, Gen, QuickCheck};

fn list(items: &[&str]) -> List {
    items.iter().collect()
}

fn contents(l: &List) -> Vec<String> {
    l.iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

#[test]
fn entries_round_trip_from_both_ends() {
    for len in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut buf = vec![0u8; entry_size(len)];
        write_entry(&mut buf, &data);
        let (start, n) = read_forward(&buf, 0);
        assert_eq!(&buf[start..start + n], &data[..]);
        let entry = read_backward(&buf, buf.len());
        assert_eq!(entry.start, 0);
        assert_eq!(
            &buf[entry.data_start..entry.data_start + entry.data_len],
            &data[..]
        );
    }
    assert_eq!(entry_size(3), 5);
    assert_eq!(entry_size(200), 204);
}

#[test]
fn push_and_pop_at_both_ends() {
    let mut l = List::new();
    l.push(End::Head, b"b");
    l.push(End::Head, b"a");
    l.push(End::Tail, b"c");
    assert_eq!(contents(&l), ["a", "b", "c"]);
    assert_eq!(l.pop(End::Tail).as_deref(), Some(&b"c"[..]));
    assert_eq!(l.pop(End::Head).as_deref(), Some(&b"a"[..]));
    assert_eq!(l.len(), 1);
    l.check_invariants();
}

#[test]
fn remove_matching_respects_limit_and_direction() {
    let mut l = list(&["x", "a", "x", "b", "x"]);
    assert_eq!(l.remove_matching(b"x", 2, End::Tail), 2);
    assert_eq!(contents(&l), ["x", "a", "b"]);
    let mut l = list(&["x", "a", "x", "b", "x"]);
    assert_eq!(l.remove_matching(b"x", 2, End::Head), 2);
    assert_eq!(contents(&l), ["a", "b", "x"]);
    let mut l = list(&["x", "a", "x", "b", "x"]);
    assert_eq!(l.remove_matching(b"x", 0, End::Tail), 3);
    assert_eq!(contents(&l), ["a", "b"]);
    assert_eq!(l.remove_matching(b"zz", 1, End::Tail), 0);
    assert_eq!(contents(&l), ["a", "b"]);
    l.check_invariants();
}

#[test]
fn trim_drops_both_ends() {
    let mut l = list(&["a", "b", "c", "d", "e"]);
    l.trim(1, 2);
    assert_eq!(contents(&l), ["b", "c"]);
    l.trim(2, 0);
    assert!(l.is_empty());
    l.check_invariants();
}

#[test]
fn insert_set_get_position() {
    let mut l = list(&["a", "c"]);
    l.insert(1, b"b");
    l.insert(3, b"d");
    assert_eq!(contents(&l), ["a", "b", "c", "d"]);
    assert!(l.set(3, b"D"));
    assert!(!l.set(4, b"E"));
    assert_eq!(l.get(3), Some(&b"D"[..]));
    assert_eq!(l.position(b"c"), Some(2));
    assert_eq!(l.position(b"zz"), None);
    assert_eq!(l.range(1, 2).collect::<Vec<_>>(), [&b"b"[..], &b"c"[..]]);
    l.check_invariants();
}

#[test]
fn small_elements_cost_a_few_bytes_each() {
    let mut l = List::new();
    for i in 0..100_000 {
        l.push(End::Tail, format!("item:{i:06}").as_bytes());
    }
    // 11 data bytes + 2 length bytes each, plus chunk overhead.
    assert!(l.heap_bytes() < 100_000 * 14, "{} bytes", l.heap_bytes());
    let mut q = List::new();
    for i in 0..100_000 {
        q.push(End::Head, format!("item:{i:06}").as_bytes());
    }
    assert!(q.heap_bytes() < 100_000 * 15, "{} bytes", q.heap_bytes());
    l.check_invariants();
    q.check_invariants();
}

#[test]
fn a_small_list_leaves_little_free_room() {
    // Pushed one at a time, a small list's buffer stays within a
    // quarter of its entries' bytes plus one size class step: doubling
    // left up to half of it empty.
    for n in 1..=40usize {
        for end in [End::Tail, End::Head] {
            let mut l = List::new();
            for i in 0..n {
                l.push(end, format!("element-{i:03}").as_bytes());
            }
            let used = n * 15;
            let buf = l.chunks[0].buf.len();
            assert!(
                buf <= (used + used / 4 + 16).max(CHUNK_CAPACITY_MIN),
                "{n} entries of 15 bytes in a {buf}-byte buffer"
            );
        }
    }
}

#[test]
fn a_queue_frees_drained_chunks() {
    let mut l = List::new();
    for round in 0..50 {
        for i in 0..1000 {
            l.push(End::Head, format!("job-{round}-{i}").as_bytes());
        }
        for _ in 0..1000 {
            assert!(l.pop(End::Tail).is_some());
        }
        assert!(l.chunks.len() <= 2, "{} chunks left", l.chunks.len());
    }
    assert!(l.is_empty());
    l.check_invariants();
}

/// One operation on a list, applied to both the packed list and a
/// plain `VecDeque<Vec<u8>>` model.
#[derive(Debug, Clone)]
enum Op {
    Push(bool, Vec<u8>),
    Pop(bool),
    Set(usize, Vec<u8>),
    Insert(usize, Vec<u8>),
    Remove(Vec<u8>, usize, bool),
    Trim(usize, usize),
}

fn value(g: &mut Gen) -> Vec<u8> {
    // Mostly tiny values that repeat (so removals match), some long
    // enough to need two-byte lengths and fill chunks quickly.
    let len = match u8::arbitrary(g) % 8 {
        0 => 200 + usize::from(u16::arbitrary(g) % 3000),
        1 => 9000,
        _ => usize::from(u8::arbitrary(g) % 3),
    };
    vec![b'a' + u8::arbitrary(g) % 3; len]
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let n = usize::from(u8::arbitrary(g));
        match u8::arbitrary(g) % 10 {
            0..=3 => Op::Push(bool::arbitrary(g), value(g)),
            4 | 5 => Op::Pop(bool::arbitrary(g)),
            6 => Op::Set(n, value(g)),
            7 => Op::Insert(n, value(g)),
            8 => Op::Remove(value(g), n % 4, bool::arbitrary(g)),
            _ => Op::Trim(n % 5, usize::from(u8::arbitrary(g) % 5)),
        }
    }
}

fn end_of(head: bool) -> End {
    if head {
        End::Head
    } else {
        End::Tail
    }
}

fn matches_model(ops: Vec<Op>) -> bool {
    let mut list = List::new();
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    for op in ops {
        match op {
            Op::Push(head, v) => {
                list.push(end_of(head), &v);
                if head {
                    model.push_front(v)
                } else {
                    model.push_back(v)
                }
            }
            Op::Pop(head) => {
                let expected = if head {
                    model.pop_front()
                } else {
                    model.pop_back()
                };
                assert_eq!(list.pop(end_of(head)).map(Blob::into_vec), expected);
            }
            Op::Set(i, v) => {
                let in_range = i < model.len();
                assert_eq!(list.set(i, &v), in_range);
                if in_range {
                    model[i] = v;
                }
            }
            Op::Insert(i, v) => {
                let i = i % (model.len() + 1);
                list.insert(i, &v);
                model.insert(i, v);
            }
            Op::Remove(v, limit, head) => {
                let limit_or_all = if limit == 0 { usize::MAX } else { limit };
                let mut doomed: Vec<usize> = (0..model.len()).filter(|&i| model[i] == v).collect();
                if !head {
                    doomed.reverse();
                }
                doomed.truncate(limit_or_all);
                doomed.sort_unstable();
                for &i in doomed.iter().rev() {
                    model.remove(i);
                }
                assert_eq!(list.remove_matching(&v, limit, end_of(head)), doomed.len());
            }
            Op::Trim(head, tail) => {
                let head = head.min(model.len());
                let tail = tail.min(model.len() - head);
                list.trim(head, tail);
                model.drain(..head);
                model.truncate(model.len() - tail);
            }
        }
        list.check_invariants();
        let forward: Vec<&[u8]> = list.iter().collect();
        let expected: Vec<&[u8]> = model.iter().map(Vec::as_slice).collect();
        assert_eq!(forward, expected);
        let backward: Vec<&[u8]> = list.iter().rev().collect();
        assert_eq!(backward, expected.iter().rev().copied().collect::<Vec<_>>());
        for (i, item) in model.iter().enumerate() {
            assert_eq!(list.get(i), Some(item.as_slice()));
        }
        if !model.is_empty() {
            let (a, b) = (model.len() / 3, model.len() - 1);
            assert!(list.range(a, b).eq(model.range(a..=b).map(Vec::as_slice)));
        }
    }
    true
}

#[test]
fn packed_list_matches_a_plain_deque() {
    QuickCheck::new()
        .rng(Gen::new(300))
        .tests(300)
        .quickcheck(matches_model as fn(Vec<Op>) -> bool);
}

#[test]
fn mixed_iteration_from_both_ends_meets_in_the_middle() {
    let values: Vec<String> = (0..3000)
        .map(|i| format!("{i:0>width$}", width = i % 40))
        .collect();
    let l: List = values.iter().collect();
    let mut it = l.iter();
    let mut front = Vec::new();
    let mut back = Vec::new();
    while let Some(x) = it.next() {
        front.push(x);
        if let Some(y) = it.next_back() {
            back.push(y);
        }
    }
    back.reverse();
    front.extend(back);
    assert!(front
        .iter()
        .copied()
        .eq(values.iter().map(String::as_bytes)));
}

#[test]
fn a_built_list_has_the_chunks_of_pushes_in_exactly_sized_buffers() {
    let mut g = Gen::new(64);
    for round in 0..200 {
        let n = usize::arbitrary(&mut g) % 300;
        let items: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let len = match u8::arbitrary(&mut g) % 10 {
                    0 => 5000 + usize::arbitrary(&mut g) % 10_000,
                    1..=3 => usize::arbitrary(&mut g) % 300,
                    _ => usize::arbitrary(&mut g) % 20,
                };
                (0..len).map(|j| (i + j) as u8).collect()
            })
            .collect();
        let mut pushed = List::new();
        let mut builder = Builder::default();
        for item in &items {
            pushed.push(End::Tail, item);
            builder.push(item);
        }
        let built = builder.finish();
        assert_eq!(built.len(), n, "round {round}");
        assert!(built.iter().map(|b| b.to_vec()).eq(items.iter().cloned()));
        let counts = |l: &List| l.chunks.iter().map(|c| c.count).collect::<Vec<_>>();
        assert_eq!(counts(&built), counts(&pushed), "round {round}");
        for c in &built.chunks {
            assert_eq!((c.start, c.end), (0, c.buf.len()), "round {round}");
        }
    }
}
