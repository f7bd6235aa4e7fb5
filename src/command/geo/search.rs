//! The search itself: the 9 boxes' score ranges scanned in Redis's order
//! (`membersOfAllNeighbors`, `geoGetPointsInRange`), the sort (glibc's
//! stable `qsort` for a full sort, Redis's `pqsort` for a partial one, so
//! equal distances come out in Redis's order), and the store.

use super::Ctx;
use crate::types::geohash::{self, Shape};
use crate::types::zset::{ScoreRange, ZSet};
use crate::types::{Blob, Value};

/// A point found by a search (Redis's `geoPoint`).
pub struct Point {
    /// `[longitude, latitude]`, decoded from the score.
    pub xy: [f64; 2],
    /// Distance from the centre: meters, then in the shape's unit.
    pub dist: f64,
    /// The score (the 52-bit geohash).
    pub score: f64,
    /// The member.
    pub member: Vec<u8>,
}

/// The requested order.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// As found.
    #[default]
    None,
    /// Nearest first.
    Asc,
    /// Farthest first.
    Desc,
}

/// C's `(long long)` of a score (WITHHASH): truncation, and the x86-64
/// "integer indefinite" out of range.
pub fn c_long_long(score: f64) -> i64 {
    const TWO_63: f64 = 9223372036854775808.0;
    if !(-TWO_63..TWO_63).contains(&score) {
        i64::MIN
    } else {
        score as i64
    }
}

/// The members of `z` inside `shape`, in the order Redis finds them;
/// `limit` (ANY) stops the search once that many are found (0: no limit).
pub fn search(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Point> {
    let areas = geohash::search_areas(shape);
    let mut found = Vec::new();
    let mut last_processed: Option<usize> = None;
    let full = |found: &Vec<Point>| !found.is_empty() && limit != 0 && found.len() >= limit;
    for (i, hash) in areas.iter().enumerate() {
        if hash.is_zero() {
            continue;
        }
        // Large radii can make adjacent neighbours the same box.
        if last_processed.is_some_and(|last| last != 0 && areas[last] == *hash) {
            continue;
        }
        if full(&found) {
            break;
        }
        let (min, max) = geohash::box_scores(*hash);
        points_in_range(z, min as f64, max as f64, shape, &mut found, limit);
        last_processed = Some(i);
    }
    found
}

/// `geoGetPointsInRange`: the members with `min <= score < max` inside
/// the shape, appended to `found`.
fn points_in_range(
    z: &ZSet,
    min: f64,
    max: f64,
    shape: &Shape,
    found: &mut Vec<Point>,
    limit: usize,
) {
    let range = ScoreRange {
        min,
        max,
        min_exclusive: false,
        max_exclusive: true,
    };
    let Some(start) = z.first_in_range(&range) else {
        return;
    };
    for (member, score) in z.iter_from(start, false) {
        if score >= max {
            break;
        }
        let xy = geohash::decode_score(score);
        if let Some(dist) = geohash::within(shape, xy) {
            found.push(Point {
                xy,
                dist,
                score,
                member: member.to_vec(),
            });
        }
        if !found.is_empty() && limit != 0 && found.len() >= limit {
            break;
        }
    }
}

/// Redis's `sort_gp_asc` as an ordering: greater, equal, or (anything
/// else, NaN included) less.
fn cmp_asc(a: &Point, b: &Point) -> i32 {
    if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    }
}

/// Sorts `points` as Redis does: the whole array with `qsort` (glibc's
/// merge sort: stable) when every point is returned, otherwise the first
/// `returned` with `pqsort`.
pub fn sort_points(points: &mut [Point], sort: Sort, returned: usize) {
    let cmp: fn(&Point, &Point) -> i32 = match sort {
        Sort::None => return,
        Sort::Asc => cmp_asc,
        Sort::Desc => |a, b| -cmp_asc(a, b),
    };
    if returned == points.len() {
        points.sort_by(|a, b| cmp(a, b).cmp(&0));
    } else if returned > 0 {
        pqsort(points, cmp, 0, returned - 1);
    }
}

/// Redis's `pqsort` (Bentley & McIlroy's quicksort that skips the
/// partitions outside `lrange..=rrange`), over elements instead of bytes.
fn pqsort<T>(v: &mut [T], cmp: fn(&T, &T) -> i32, lrange: usize, rrange: usize) {
    pqsort_at(v, 0, v.len(), cmp, lrange as isize, rrange as isize);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

/// Swaps `n` elements from `a` with `n` from `b`, pairwise.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// `_pqsort` on `v[a..a + n]`: indices stand for the C pointers.
fn pqsort_at<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: fn(&T, &T) -> i32,
    lrange: isize,
    rrange: isize,
) {
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let mut pa = a + 1;
        let mut pb = a + 1;
        let mut pc = (a + n - 1) as isize;
        let mut pd = a + n - 1;
        loop {
            while pb as isize <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb as isize <= pc {
                let r = cmp(&v[pc as usize], &v[a]);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc as usize, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb as isize > pc {
                break;
            }
            v.swap(pb, pc as usize);
            pb += 1;
            pc -= 1;
        }
        let pc = pc as usize;
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        // `lrange`/`rrange` are element indices; a partition [lo, lo+cnt)
        // is skipped when both lie before it or both after it.
        let outside = |lo: usize, cnt: usize| {
            let (lo, hi) = (lo as isize, (lo + cnt) as isize);
            (lrange < lo && rrange < lo) || (lrange >= hi && rrange >= hi)
        };
        let r = pb - pa;
        if r > 1 && !outside(a, r) {
            pqsort_at(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, n) {
                continue;
            }
        }
        return;
    }
}

/// Stores the points (member → geohash score, or distance with
/// STOREDIST) as a sorted set under `dst`.
pub fn store(ctx: &mut Ctx, dst: &[u8], points: Vec<Point>, store_dist: bool) {
    let mut entries: Vec<(Blob, f64)> = points
        .into_iter()
        .map(|p| {
            let score = if store_dist { p.dist } else { p.score };
            (Blob::from_vec(p.member), score)
        })
        .collect();
    entries.sort_by(|a, b| crate::types::ordtree::cmp_key(a.1, &a.0, b.1, &b.0));
    let limits = ctx.limits();
    let z = ZSet::from_sorted(entries, &limits);
    ctx.set_key(dst, Value::ZSet(Box::new(z)), false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pqsort_sorts_the_requested_prefix() {
        let mut rng = crate::rand::Rng::with_seed(7);
        for n in [1usize, 5, 7, 8, 30, 41, 100, 500] {
            for k in [1usize, 2, n / 2 + 1, n] {
                let k = k.min(n);
                let mut v: Vec<i64> = (0..n).map(|_| (rng.next_u64() % 50) as i64).collect();
                let mut sorted = v.clone();
                sorted.sort();
                pqsort(&mut v, |a, b| a.cmp(b) as i32, 0, k - 1);
                assert_eq!(&v[..k], &sorted[..k], "n={n} k={k}");
            }
        }
    }
}
