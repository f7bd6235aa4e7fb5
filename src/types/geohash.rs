//! Geohashes as Redis 7.0 computes them (`geohash.c`, `geohash_helper.c`).
//!
//! A geo set is a sorted set whose scores are 52-bit interleaved geohashes:
//! 26 bits of latitude (even positions) and 26 of longitude (odd), over
//! longitudes -180..180 and latitudes -85.05112878..85.05112878 (the Web
//! Mercator limits). A search covers its shape with 9 boxes (the centre
//! box at an estimated precision and its 8 neighbours, some dropped when
//! the shape cannot reach them), each one a contiguous score range.
//!
//! Every step here repeats Redis's floating-point operations in the same
//! order, so the decoded coordinates, distances and box choices are the
//! same bits as Redis's.

/// Longitude range of geo sets.
pub const LONG_MIN: f64 = -180.0;
/// Longitude range of geo sets.
pub const LONG_MAX: f64 = 180.0;
/// Latitude range of geo sets (Web Mercator's limit).
pub const LAT_MIN: f64 = -85.05112878;
/// Latitude range of geo sets (Web Mercator's limit).
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate in a score: 26 (52 in all).
pub const STEP_MAX: u8 = 26;
/// Redis's earth radius (WGS-84 quadratic mean), in meters.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
/// Half the Mercator world's width, in meters: the step estimate's limit.
const MERCATOR_MAX: f64 = 20037726.37;
/// Redis's `D_R`, degrees to radians.
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash of `step` bits per coordinate; `{0, 0}` is the "zero" hash
/// (a neighbour dropped from a search).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HashBits {
    /// The interleaved bits, `2 * step` of them.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl HashBits {
    /// Redis's `HASHISZERO`.
    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A coordinate range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// Lower end.
    pub min: f64,
    /// Upper end.
    pub max: f64,
}

/// Geo sets' ranges: (longitude, latitude).
pub const WGS84: (Range, Range) = (
    Range {
        min: LONG_MIN,
        max: LONG_MAX,
    },
    Range {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// The area a hash covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    /// Longitudes covered.
    pub longitude: Range,
    /// Latitudes covered.
    pub latitude: Range,
}

/// Interleaves the low 32 bits of `x` (even positions) and `y` (odd).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = u64::from(xlo);
    let mut y = u64::from(ylo);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave64`]: even bits in the low word, odd bits in
/// the high word.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `geohashEncode`: None outside the geo limits or the ranges, or for a
/// step outside 1..=32.
pub fn encode(ranges: (Range, Range), longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    let (long_range, lat_range) = ranges;
    if step > 32 || step == 0 {
        return None;
    }
    // (Redis lets NaN through here; no caller can pass one.)
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    // C converts the doubles to uint32_t by truncation (in range here).
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// [`encode`] over the geo ranges.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(WGS84, longitude, latitude, step)
}

/// `geohashDecode`: the area of `hash`; None for the zero hash.
pub fn decode(ranges: (Range, Range), hash: HashBits) -> Option<Area> {
    let (long_range, lat_range) = ranges;
    if hash.is_zero() {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    let div = (1u64 << step) as f64;
    // `ilato + 1` is uint32_t arithmetic in C: it wraps.
    Some(Area {
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) * 1.0 / div) * lat_scale,
            max: lat_range.min + (f64::from(ilato.wrapping_add(1)) * 1.0 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) * 1.0 / div) * long_scale,
            max: long_range.min + (f64::from(ilono.wrapping_add(1)) * 1.0 / div) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the centre of `area`, clamped to the geo
/// limits, as `[longitude, latitude]`.
pub fn area_center(area: &Area) -> [f64; 2] {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)` of a double as x86-64 code computes it (what Redis's
/// `decodeGeohash` does to any score): truncation in range; negative
/// values wrap through `int64_t`; values out of range give the "integer
/// indefinite" pattern.
pub fn score_to_u64(score: f64) -> u64 {
    const TWO_63: f64 = 9223372036854775808.0;
    let to_i64 = |d: f64| -> u64 {
        if !(-TWO_63..TWO_63).contains(&d) {
            0x8000_0000_0000_0000
        } else {
            d as i64 as u64
        }
    };
    if score >= TWO_63 {
        to_i64(score - TWO_63) ^ 0x8000_0000_0000_0000
    } else {
        to_i64(score)
    }
}

/// Redis's `decodeGeohash`: the `[longitude, latitude]` a sorted-set
/// score stands for (any score decodes; out-of-range ones are clamped).
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits {
        bits: score_to_u64(score),
        step: STEP_MAX,
    };
    let area = decode(WGS84, hash).expect("a step-26 hash is never zero");
    area_center(&area)
}

/// `geohashAlign52Bits`: the hash shifted to a 52-bit score.
pub fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// The score GEOADD stores for a position already checked to be within
/// the geo limits.
pub fn score_of(longitude: f64, latitude: f64) -> u64 {
    encode_wgs84(longitude, latitude, STEP_MAX).map_or(0, align52)
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0x5555555555555555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> shift;
    hash.bits = x | y;
}

/// The 8 boxes around a hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Neighbors {
    /// North.
    pub north: HashBits,
    /// East.
    pub east: HashBits,
    /// West.
    pub west: HashBits,
    /// South.
    pub south: HashBits,
    /// North-east.
    pub north_east: HashBits,
    /// South-east.
    pub south_east: HashBits,
    /// North-west.
    pub north_west: HashBits,
    /// South-west.
    pub south_west: HashBits,
}

/// `geohashNeighbors`.
pub fn neighbors(hash: HashBits) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

/// `geohashEstimateStepsByRadius`: the precision of the 9 boxes of a
/// search of `range_meters` around latitude `lat`.
pub fn estimate_steps_by_radius(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShapeKind {
    /// BYRADIUS (and GEORADIUS*): a radius in the shape's unit.
    Circle {
        /// The radius.
        radius: f64,
    },
    /// BYBOX: width and height in the shape's unit.
    Rect {
        /// East-west size.
        width: f64,
        /// North-south size.
        height: f64,
    },
}

/// Redis's `GeoShape`: centre, kind and unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// `[longitude, latitude]` of the centre.
    pub xy: [f64; 2],
    /// Meters per unit.
    pub conversion: f64,
    /// Circle or box.
    pub kind: ShapeKind,
}

/// `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]`.
pub fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [longitude, latitude] = shape.xy;
    let (height, width) = match shape.kind {
        ShapeKind::Circle { radius } => (shape.conversion * radius, shape.conversion * radius),
        ShapeKind::Rect { width, height } => (
            shape.conversion * (height / 2.0),
            shape.conversion * (width / 2.0),
        ),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    let delta = if southern {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        longitude - delta,
        latitude - lat_delta,
        longitude + delta,
        latitude + lat_delta,
    ]
}

/// The 9 boxes of a search: the centre box and its neighbours (dropped
/// ones are zero), in the order Redis visits them.
pub fn search_areas(shape: &Shape) -> [HashBits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [longitude, latitude] = shape.xy;
    let mut radius_meters = match shape.kind {
        ShapeKind::Circle { radius } => radius,
        ShapeKind::Rect { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    };
    radius_meters *= shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let at = |steps: u8| {
        let hash = encode(WGS84, longitude, latitude, steps).unwrap_or(HashBits {
            bits: 0,
            step: steps,
        });
        let area = decode(WGS84, hash).unwrap_or(Area {
            longitude: Range { min: 0.0, max: 0.0 },
            latitude: Range { min: 0.0, max: 0.0 },
        });
        (hash, neighbors(hash), area)
    };
    let (mut hash, mut n, mut area) = at(steps);
    let decoded = |h: HashBits| decode(WGS84, h);
    let mut decrease = false;
    if let (Some(north), Some(south), Some(east), Some(west)) = (
        decoded(n.north),
        decoded(n.south),
        decoded(n.east),
        decoded(n.west),
    ) {
        decrease = north.latitude.max < max_lat
            || south.latitude.min > min_lat
            || east.longitude.max < max_lon
            || west.longitude.min > min_lon;
    }
    if steps > 1 && decrease {
        steps -= 1;
        (hash, n, area) = at(steps);
    }
    if steps >= 2 {
        let zero = HashBits::default();
        if area.latitude.min < min_lat {
            n.south = zero;
            n.south_west = zero;
            n.south_east = zero;
        }
        if area.latitude.max > max_lat {
            n.north = zero;
            n.north_east = zero;
            n.north_west = zero;
        }
        if area.longitude.min < min_lon {
            n.west = zero;
            n.south_west = zero;
            n.north_west = zero;
        }
        if area.longitude.max > max_lon {
            n.east = zero;
            n.south_east = zero;
            n.north_east = zero;
        }
    }
    [
        hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ]
}

/// `scoresOfGeoHashBox`: the scores of a box, `min <= score < max`.
pub fn box_scores(hash: HashBits) -> (u64, u64) {
    let min = align52(hash);
    let max = align52(HashBits {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    });
    (min, max)
}

/// `geohashGetLatDistance`: the distance between two latitudes.
pub fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// `geohashGetDistance`: the haversine distance in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// `geoWithinShape` after decoding: the distance from the shape's centre
/// to `xy` when the point is inside the shape.
pub fn within(shape: &Shape, xy: [f64; 2]) -> Option<f64> {
    let [x1, y1] = shape.xy;
    let [x2, y2] = xy;
    match shape.kind {
        ShapeKind::Circle { radius } => {
            let d = distance(x1, y1, x2, y2);
            // Redis rejects only `d > radius` (a NaN distance is inside).
            match d.partial_cmp(&(radius * shape.conversion)) {
                Some(std::cmp::Ordering::Greater) => None,
                _ => Some(d),
            }
        }
        ShapeKind::Rect { width, height } => {
            let width_m = width * shape.conversion;
            let height_m = height * shape.conversion;
            if lat_distance(y2, y1) > height_m / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width_m / 2.0 {
                return None;
            }
            Some(distance(x1, y1, x2, y2))
        }
    }
}

/// GEOHASH's 11-character standard geohash of a score: decoded, then
/// encoded again over latitudes -90..90, the 11th character always `0`.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let ranges = (
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
    );
    // Redis ignores a failed encode; its hash is then all zero bits.
    let bits = encode(ranges, lon, lat, 26).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, slot) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *slot = ALPHABET[idx as usize];
    }
    out
}

/// Redis's `fixedpoint_d2string`: `d` rounded (ties to even, `llrint`) to
/// `digits` fractional digits, as GEODIST and WITHDIST print distances.
pub fn fixed_point(d: f64, digits: u32) -> String {
    if d == 0.0 {
        return format!("0.{}", "0".repeat(digits as usize));
    }
    let scaled = (d * 10f64.powi(digits as i32)).round_ties_even();
    // llrint of a value out of range gives LLONG_MIN.
    const TWO_63: f64 = 9223372036854775808.0;
    let svalue = if !(-TWO_63..TWO_63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let negative = svalue < 0;
    let value = svalue.unsigned_abs();
    let pow = 10u64.pow(digits);
    format!(
        "{}{}.{:0width$}",
        if negative { "-" } else { "" },
        value / pow,
        value % pow,
        width = digits as usize
    )
}

#[cfg(test)]
mod tests;
