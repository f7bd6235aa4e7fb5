//! Geohash checks against values Redis 7.0 prints (its documentation's
//! Sicily example, checked with redis-server).

use super::*;

const PALERMO: (f64, f64) = (13.361389, 38.115556);
const CATANIA: (f64, f64) = (15.087269, 37.502669);

#[test]
fn scores_are_redis_scores() {
    assert_eq!(score_of(PALERMO.0, PALERMO.1), 3479099956230698);
    assert_eq!(score_of(CATANIA.0, CATANIA.1), 3479447370796909);
    assert_eq!(score_of(-180.0, LAT_MIN), 0);
    // The top edge: the truncated offsets are 2^26, one bit past 52.
    assert_eq!(score_of(180.0, LAT_MAX), 3 << 52);
}

#[test]
fn interleave_round_trips() {
    for (x, y) in [
        (0u32, 0u32),
        (1, 0),
        (0, 1),
        (0x3ffffff, 0x1234567),
        (u32::MAX, 7),
    ] {
        let i = interleave64(x, y);
        assert_eq!(deinterleave64(i), u64::from(x) | (u64::from(y) << 32));
    }
}

#[test]
fn decoded_positions_are_redis_positions() {
    let human = |d: f64| crate::types::long_double::Ld::from_f64(d).to_human();
    let [lon, lat] = decode_score(3479099956230698.0);
    assert_eq!(human(lon), "13.36138933897018433");
    assert_eq!(human(lat), "38.11555639549629859");
    let [lon, lat] = decode_score(3479447370796909.0);
    assert_eq!(human(lon), "15.08726745843887329");
    assert_eq!(human(lat), "37.50266842333162032");
}

#[test]
fn distances_are_redis_distances() {
    let [a, b] = decode_score(3479099956230698.0);
    let [c, d] = decode_score(3479447370796909.0);
    let meters = distance(a, b, c, d);
    assert_eq!(fixed_point(meters, 4), "166274.1516");
    assert_eq!(fixed_point(meters / 1000.0, 4), "166.2742");
    assert_eq!(fixed_point(0.0, 4), "0.0000");
    assert_eq!(fixed_point(0.00004, 4), "0.0000");
    assert_eq!(fixed_point(0.00005, 4), "0.0000"); // llrint(0.5): ties to even
    assert_eq!(fixed_point(1.23456, 4), "1.2346");
    assert_eq!(fixed_point(-1.5, 4), "-1.5000");
    // Same longitude: the latitude-only shortcut.
    assert_eq!(distance(10.0, 0.0, 10.0, 1.0), lat_distance(0.0, 1.0));
}

#[test]
fn standard_geohashes_are_redis_geohashes() {
    assert_eq!(&standard_geohash(3479099956230698.0), b"sqc8b49rny0");
    assert_eq!(&standard_geohash(3479447370796909.0), b"sqdtr74hyu0");
}

#[test]
fn step_estimate_follows_the_radius_and_latitude() {
    assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
    assert_eq!(estimate_steps_by_radius(200_000.0, 38.0), 6);
    assert_eq!(estimate_steps_by_radius(1.0, 0.0), 24);
    assert_eq!(estimate_steps_by_radius(1.0, 70.0), 23);
    assert_eq!(estimate_steps_by_radius(1.0, -85.0), 22);
    assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
    assert_eq!(estimate_steps_by_radius(1e-9, 0.0), 26);
}

#[test]
fn neighbours_touch_the_box() {
    let hash = encode_wgs84(PALERMO.0, PALERMO.1, 10).unwrap();
    let area = decode(WGS84, hash).unwrap();
    let n = neighbors(hash);
    let at = |h: HashBits| decode(WGS84, h).unwrap();
    assert_eq!(at(n.east).longitude.min, area.longitude.max);
    assert_eq!(at(n.west).longitude.max, area.longitude.min);
    assert_eq!(at(n.north).latitude.min, area.latitude.max);
    assert_eq!(at(n.south).latitude.max, area.latitude.min);
    assert_eq!(at(n.north_east).latitude.min, area.latitude.max);
    assert_eq!(at(n.north_east).longitude.min, area.longitude.max);
    assert_eq!(at(n.south_west).latitude.max, area.latitude.min);
    assert_eq!(at(n.south_west).longitude.max, area.longitude.min);
    // East of the last column wraps to the first.
    let edge = encode_wgs84(179.99, 0.0, 4).unwrap();
    assert_eq!(at(neighbors(edge).east).longitude.min, -180.0);
}

#[test]
fn search_areas_drop_unreachable_neighbours() {
    // A small radius in the middle of its box reaches no neighbour.
    let hash = encode_wgs84(PALERMO.0, PALERMO.1, 26).unwrap();
    let [lon, lat] = area_center(&decode(WGS84, hash).unwrap());
    let shape = Shape {
        xy: [lon, lat],
        conversion: 1.0,
        kind: ShapeKind::Circle { radius: 0.05 },
    };
    let areas = search_areas(&shape);
    assert!(!areas[0].is_zero());
    assert!(areas[1..].iter().all(|h| h.is_zero()), "{areas:?}");
    // A large one needs neighbours.
    let shape = Shape {
        kind: ShapeKind::Circle { radius: 500.0 },
        conversion: 1000.0,
        ..shape
    };
    assert!(search_areas(&shape)[1..].iter().any(|h| !h.is_zero()));
    let (min, max) = box_scores(areas[0]);
    assert_eq!(max - min, 1 << (52 - 2 * u32::from(areas[0].step)));
}

#[test]
fn shapes_contain_their_points() {
    let shape = Shape {
        xy: [PALERMO.0, PALERMO.1],
        conversion: 1000.0,
        kind: ShapeKind::Circle { radius: 200.0 },
    };
    assert!(within(&shape, [CATANIA.0, CATANIA.1]).is_some());
    let small = Shape {
        kind: ShapeKind::Circle { radius: 100.0 },
        ..shape
    };
    assert!(within(&small, [CATANIA.0, CATANIA.1]).is_none());
    let rect = Shape {
        kind: ShapeKind::Rect {
            width: 400.0,
            height: 400.0,
        },
        ..shape
    };
    assert!(within(&rect, [CATANIA.0, CATANIA.1]).is_some());
    let flat = Shape {
        kind: ShapeKind::Rect {
            width: 400.0,
            height: 1.0,
        },
        ..shape
    };
    assert!(within(&flat, [CATANIA.0, CATANIA.1]).is_none());
}

#[test]
fn scores_convert_as_x86_c_converts_them() {
    assert_eq!(score_to_u64(5.7), 5);
    assert_eq!(score_to_u64(-1.0), u64::MAX);
    assert_eq!(score_to_u64(1e19), 10_000_000_000_000_000_000);
    assert_eq!(score_to_u64(1e300), 0);
    assert_eq!(score_to_u64(-1e300), 0x8000_0000_0000_0000);
}
