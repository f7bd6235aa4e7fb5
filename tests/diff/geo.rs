//! Differential tests: the geo commands (GEOADD, GEODIST, GEOHASH,
//! GEOPOS, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and the
//! `_RO` forms), RESP2 and RESP3, replies compared byte for byte: scores,
//! coordinates (`%.17Lf`-style), distances (4 decimals), hashes, the order
//! of unsorted results (the 9 boxes' scan order), ties in sorted ones,
//! and every error.

use crate::harness::{check_both_protocols, test_seed, Pair};
use hozon::rand::Rng;

const SICILY: &str = r#"
GEOADD Sicily 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania"
ZRANGE Sicily 0 -1 WITHSCORES
GEODIST Sicily Palermo Catania
GEODIST Sicily Palermo Catania km
GEODIST Sicily Palermo Catania KM
GEODIST Sicily Palermo Catania mi
GEODIST Sicily Palermo Catania ft
GEODIST Sicily Palermo Catania m
GEODIST Sicily Palermo Catania parsecs
GEODIST Sicily Palermo Catania km extra
GEODIST Sicily Palermo Palermo
GEODIST Sicily Palermo Nowhere
GEODIST Sicily Nowhere Palermo
GEODIST missing a b
GEODIST missing a b parsecs
GEOHASH Sicily Palermo Catania Nowhere
GEOHASH Sicily
GEOHASH missing a b
GEOPOS Sicily Palermo Catania Nowhere
GEOPOS Sicily
GEOPOS missing a
GEORADIUS Sicily 15 37 100 km
GEORADIUS Sicily 15 37 200 km
GEORADIUS Sicily 15 37 200 km WITHDIST
GEORADIUS Sicily 15 37 200 km WITHCOORD
GEORADIUS Sicily 15 37 200 km WITHHASH
GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH
GEORADIUS Sicily 15 37 200 km withhash withcoord withdist DESC
GEORADIUS Sicily 15 37 200 km ASC COUNT 1
GEORADIUS Sicily 15 37 200 km DESC COUNT 1
GEORADIUS Sicily 15 37 200 km COUNT 1
GEORADIUS Sicily 15 37 200 km COUNT 1 ANY
GEORADIUS Sicily 15 37 200 km COUNT 5 ANY DESC
GEORADIUS_RO Sicily 15 37 200 km WITHDIST ASC
GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST
GEORADIUSBYMEMBER Sicily Palermo 100 km
GEORADIUSBYMEMBER_RO Sicily Palermo 200 km WITHCOORD DESC
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST
GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC WITHHASH
GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 0 m WITHDIST
GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 0 0 km
GEOSEARCH Sicily fromlonlat 15 37 byradius 200 mi withdist
GEOSEARCH Sicily fromlonlat 15 37 byradius 200 ft withdist
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY WITHDIST
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC
ZRANGE dst 0 -1 WITHSCORES
OBJECT ENCODING dst
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST
ZRANGE dst 0 -1 WITHSCORES
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 DESC STOREDIST
ZRANGE dst 0 -1 WITHSCORES
GEOSEARCHSTORE dst Sicily FROMLONLAT 0 0 BYRADIUS 1 km
EXISTS dst
GEOSEARCHSTORE dst Sicily FROMLONLAT 0 0 BYRADIUS 1 km
GEORADIUS Sicily 15 37 200 km STORE dst2
ZRANGE dst2 0 -1 WITHSCORES
GEORADIUS Sicily 15 37 200 km STOREDIST dst2
ZRANGE dst2 0 -1 WITHSCORES
GEORADIUSBYMEMBER Sicily Palermo 200 km STORE dst2 COUNT 1
ZRANGE dst2 0 -1 WITHSCORES
GEORADIUSBYMEMBER Sicily Palermo 200 km STOREDIST dst2 DESC
ZRANGE dst2 0 -1 WITHSCORES
GEORADIUS Sicily 0 0 1 km STORE dst2
EXISTS dst2
SET str x
GEOSEARCHSTORE str Sicily FROMLONLAT 15 37 BYRADIUS 200 km
TYPE str
GEOSEARCHSTORE dst missing FROMLONLAT 15 37 BYRADIUS 200 km
GEOSEARCHSTORE str missing FROMLONLAT 15 37 BYRADIUS 200 km
EXISTS str
GEORADIUS missing 15 37 200 km STORE dst3
GEORADIUS missing 15 37 200 km
GEORADIUSBYMEMBER missing m 200 km
GEORADIUSBYMEMBER missing m notanumber km WITHDIST
GEOSEARCH missing FROMMEMBER m BYRADIUS 1 km
GEOSEARCH missing FROMLONLAT 1 1 BYRADIUS 1 km
"#;

#[test]
fn sicily_basics() {
    check_both_protocols(SICILY);
}

const ADD: &str = r#"
GEOADD k 10 20 a
GEOADD k 10 20 a
GEOADD k 11 20 a
GEOADD k CH 12 20 a
GEOADD k CH 12 20 a 1 1 b
GEOADD k NX 13 20 a 2 2 c
GEOADD k XX 14 20 a 3 3 d
GEOADD k XX CH 15 20 a 3 3 d
GEOADD k NX XX 1 1 e
GEOADD k CH NX XX 1 1 e
GEOADD k 1 1
GEOADD k ch 1 1
GEOADD k ch ch ch
GEOADD k nx ch 1
GEOADD k gt 1 1 e
GEOADD k 1 1 e 2
GEOADD k 200 1 e
GEOADD k 1 100 e
GEOADD k -180.0000001 0 e
GEOADD k 180 85.05112878 top
GEOADD k -180 -85.05112878 bottom
GEOADD k 180 85.05112879 e
GEOADD k inf 0 e
GEOADD k nan 0 e
GEOADD k x 0 e
GEOADD k 0 " 1" e
GEOADD k 1e-400 0 e
GEOADD k 0x10 0x10 hex
GEOADD k 0 0 zero 1 1 ok 1 100 bad
EXISTS zero
ZRANGE k 0 -1 WITHSCORES
GEOPOS k a b top bottom hex
GEOHASH k a b top bottom hex
GEODIST k top bottom
GEODIST k top bottom km
SET s v
GEOADD s 1 1 a
GEOADD s 1 1000 a
GEOPOS s a
GEOHASH s a
GEODIST s a b
GEORADIUS s 1 1 1 km
GEOSEARCH s FROMLONLAT 1 1 BYRADIUS 1 km
GEOSEARCHSTORE d s FROMLONLAT 1 1 BYRADIUS 1 km
GEOSEARCHSTORE s k FROMLONLAT 1 1 BYRADIUS 1000 km
TYPE s
GEOADD
GEOADD k
GEOADD k 1 1
GEOPOS
GEODIST k a
ZADD odd -1 neg 0 zero 1e19 huge 1e300 vast 4503599627370496 big 3.5 frac
GEOPOS odd neg zero huge vast big frac
GEOHASH odd neg zero huge vast big frac
GEODIST odd neg huge
GEODIST odd big frac
GEOSEARCH odd FROMMEMBER zero BYRADIUS 1 km WITHHASH WITHCOORD
GEOSEARCH odd FROMMEMBER frac BYRADIUS 50000 km WITHHASH WITHCOORD WITHDIST ASC
"#;

#[test]
fn geoadd_options_errors_and_odd_scores() {
    check_both_protocols(ADD);
}

const SEARCH_ERRORS: &str = r#"
GEOADD k 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
GEORADIUS k 200 37 1 km
GEORADIUS k 15 91 1 km
GEORADIUS k x 37 1 km
GEORADIUS k 15 x 1 km
GEORADIUS k 15 37 x km
GEORADIUS k 15 37 -1 km
GEORADIUS k 15 37 1 parsecs
GEORADIUS k 15 37 -1 parsecs
GEORADIUS k 15 37 1 km COUNT
GEORADIUS k 15 37 1 km COUNT 0
GEORADIUS k 15 37 1 km COUNT -1
GEORADIUS k 15 37 1 km COUNT x
GEORADIUS k 15 37 1 km COUNT 1.5
GEORADIUS k 15 37 1 km ANY
GEORADIUS k 15 37 1 km ANY COUNT 0
GEORADIUS k 15 37 1 km STORE
GEORADIUS k 15 37 1 km STOREDIST
GEORADIUS k 15 37 1 km STORE d WITHDIST
GEORADIUS k 15 37 1 km WITHHASH STOREDIST d
GEORADIUS k 15 37 1 km WITHCOORD STORE d ANY
GEORADIUS k 15 37 1 km FROMMEMBER Palermo
GEORADIUS k 15 37 1 km BYRADIUS 1 km
GEORADIUS k 15 37 1 km bogus
GEORADIUS k 15 37 1 km
GEORADIUS_RO k 15 37 1 km STORE d
GEORADIUS_RO k 15 37 1 km STOREDIST d
GEORADIUSBYMEMBER k Nowhere 1 km
GEORADIUSBYMEMBER k Nowhere x km
GEORADIUSBYMEMBER k Palermo x km
GEORADIUSBYMEMBER k Palermo 1 parsecs
GEORADIUSBYMEMBER k Palermo 1 km WITHDIST STORE d
GEORADIUSBYMEMBER_RO k Palermo 1 km STORE d
GEOSEARCH k
GEOSEARCH k BYRADIUS 1 km
GEOSEARCH k FROMLONLAT 15 37
GEOSEARCH k FROMMEMBER Palermo
geosearch k FROMMEMBER Palermo
GeoSearch k BYBOX 1 1 km
GEOSEARCH k FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 1 km
GEOSEARCH k FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 1 km
GEOSEARCH k FROMMEMBER Palermo FROMMEMBER Catania BYRADIUS 1 km
GEOSEARCH k FROMMEMBER Palermo BYRADIUS 1 km BYBOX 1 1 km
GEOSEARCH k FROMMEMBER Palermo BYBOX 1 1 km BYRADIUS 1 km
GEOSEARCH k FROMMEMBER Palermo BYRADIUS 1 km BYRADIUS 2 km
GEOSEARCH k FROMMEMBER Nowhere BYRADIUS 1 km
GEOSEARCH k FROMMEMBER Nowhere
GEOSEARCH k FROMMEMBER
GEOSEARCH k FROMLONLAT 15
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1
GEOSEARCH k FROMLONLAT 15 37 BYBOX 1 1
GEOSEARCH k FROMLONLAT 15 37 BYBOX x 1 km
GEOSEARCH k FROMLONLAT 15 37 BYBOX 1 x km
GEOSEARCH k FROMLONLAT 15 37 BYBOX x x km
GEOSEARCH k FROMLONLAT 15 37 BYBOX -1 1 km
GEOSEARCH k FROMLONLAT 15 37 BYBOX 1 -1 km
GEOSEARCH k FROMLONLAT 15 37 BYBOX 1 1 parsecs
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS -1 parsecs
GEOSEARCH k FROMLONLAT 200 37 BYRADIUS 1 km
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km STORE d
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST d
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km ANY
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km COUNT 0
GEOSEARCHSTORE d k FROMLONLAT 15 37 BYRADIUS 1 km WITHDIST
GEOSEARCHSTORE d k FROMLONLAT 15 37 BYRADIUS 1 km WITHCOORD
GEOSEARCHSTORE d k FROMLONLAT 15 37 BYRADIUS 1 km STORE x
GEOSEARCHSTORE d k FROMLONLAT 15 37
geosearchstore d k FROMLONLAT 15 37
GEOSEARCHSTORE d k BYRADIUS 1 km
GEOSEARCHSTORE d k FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST STOREDIST
GEOSEARCHSTORE d missing FROMMEMBER x BYBOX 1 1 km WITHDIST
GEOSEARCH missing FROMMEMBER x BYBOX 1 1 km ANY
GEOSEARCH missing FROMMEMBER x FROMLONLAT 1 1 BYBOX 1 1 km
GEOSEARCH missing BYBOX 1 1 km
GEORADIUS
GEOSEARCH k FROMLONLAT 15 37 BYRADIUS 1 km COUNT 1 ANY ASC
RPUSH l a
GEORADIUS l 15 37 1 km
GEORADIUS l 200 37 1 km
GEORADIUSBYMEMBER l x 1 km
GEOSEARCH l FROMLONLAT 200 37 BYRADIUS 1 km
GEOSEARCHSTORE d l FROMLONLAT 15 37 BYRADIUS 1 km
GEOSEARCHSTORE l k FROMLONLAT 15 37 BYRADIUS 200 km
TYPE l
"#;

#[test]
fn search_option_errors() {
    check_both_protocols(SEARCH_ERRORS);
}

/// Points at the edges of the map: the poles' step correction, the
/// antimeridian (boxes wrap), huge radii (neighbours equal to the centre
/// box are skipped), and members with equal distances (the sort's ties:
/// glibc's stable qsort for a full sort, Redis's pqsort with COUNT).
const EDGES: &str = r#"
GEOADD e -179.9 0 w1 179.9 0 e1 -179.99 0.01 w2 179.99 -0.01 e2
GEOSEARCH e FROMLONLAT 180 0 BYRADIUS 50 km WITHDIST
GEOSEARCH e FROMLONLAT -180 0 BYBOX 100 100 km WITHDIST ASC
GEOADD e 0 85 n1 90 85 n2 180 85 n3 -90 85 n4 0 84 n5 0 -85 s1 180 -85 s2
GEOSEARCH e FROMLONLAT 0 85 BYRADIUS 300 km WITHDIST
GEOSEARCH e FROMLONLAT 0 85 BYRADIUS 3000 km WITHDIST
GEOSEARCH e FROMLONLAT 0 -85 BYBOX 3000 3000 km WITHDIST
GEOSEARCH e FROMLONLAT 0 0 BYRADIUS 20000 km
GEOSEARCH e FROMLONLAT 0 0 BYRADIUS 20000 km ASC
GEOSEARCH e FROMLONLAT 0 0 BYBOX 40000 40000 km DESC WITHDIST
GEOSEARCH e FROMLONLAT 0 0 BYRADIUS 6000 km WITHDIST
GEOSEARCH e FROMLONLAT 0 70 BYRADIUS 6000 km
GEOSEARCH e FROMLONLAT 0 -70 BYRADIUS 6000 km
GEOADD t 1 1 a 1 1 b 1 1 c 1 1 d 1 1 e 1 1 f 1 1 g 1 1 h 2 2 x 0 0 y 1 1 i 1 1 j
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km ASC
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km DESC
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 3
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 9 DESC
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 11
GEOSEARCH t FROMLONLAT 0 0 BYRADIUS 500 km COUNT 4 DESC WITHDIST
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 2 ANY
GEOSEARCH t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 2 ANY DESC
GEOSEARCHSTORE st t FROMLONLAT 1 1 BYRADIUS 500 km COUNT 5 STOREDIST
ZRANGE st 0 -1 WITHSCORES
GEOSEARCHSTORE st t FROMLONLAT 2 2 BYRADIUS 500 km COUNT 5 DESC STOREDIST
ZRANGE st 0 -1 WITHSCORES
"#;

#[test]
fn map_edges_and_ties() {
    check_both_protocols(EDGES);
}

/// A geo set past `zset-max-listpack-entries` (a skiplist), searched and
/// stored into both encodings.
#[test]
fn large_sets_and_store_encodings() {
    let mut p = Pair::new();
    let mut rng = Rng::with_seed(test_seed());
    let mut args = vec!["GEOADD".to_string(), "big".into()];
    for i in 0..600 {
        let lon = 2.0 + (rng.next_u64() % 100_000) as f64 / 100_000.0;
        let lat = 48.0 + (rng.next_u64() % 100_000) as f64 / 100_000.0;
        args.extend([format!("{lon:.5}"), format!("{lat:.5}"), format!("m{i}")]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.check(&refs);
    p.check(&["OBJECT", "ENCODING", "big"]);
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        p.script(
            "GEOSEARCH big FROMLONLAT 2.5 48.5 BYRADIUS 5 km
            GEOSEARCH big FROMLONLAT 2.5 48.5 BYRADIUS 5 km WITHDIST WITHCOORD WITHHASH ASC
            GEOSEARCH big FROMMEMBER m7 BYBOX 10 3 km DESC COUNT 20 WITHDIST
            GEOSEARCH big FROMMEMBER m7 BYBOX 10 3 km COUNT 20 ANY
            GEORADIUSBYMEMBER big m9 3 km WITHDIST COUNT 50
            GEOSEARCHSTORE small big FROMLONLAT 2.5 48.5 BYRADIUS 2 km COUNT 10
            OBJECT ENCODING small
            ZRANGE small 0 -1 WITHSCORES
            GEOSEARCHSTORE large big FROMLONLAT 2.5 48.5 BYRADIUS 50 km
            OBJECT ENCODING large
            ZRANGE large 0 -1 WITHSCORES
            GEOSEARCHSTORE large big FROMLONLAT 2.5 48.5 BYRADIUS 50 km STOREDIST
            ZRANGE large 0 20 WITHSCORES",
        );
    }
}

/// A random position: mostly in a few clusters (so searches find
/// points), some anywhere, some at the map's edges.
fn random_point(rng: &mut Rng, centres: &[(f64, f64)]) -> (String, String) {
    let unit = |rng: &mut Rng| (rng.next_u64() % 1_000_001) as f64 / 1_000_000.0;
    let (lon, lat) = match rng.next_u64() % 10 {
        0 => (unit(rng) * 360.0 - 180.0, unit(rng) * 170.0 - 85.0),
        1 => (
            if rng.next_u64().is_multiple_of(2) {
                179.99
            } else {
                -179.99
            } + unit(rng) * 0.009,
            unit(rng) * 2.0 - 1.0,
        ),
        2 => (unit(rng) * 360.0 - 180.0, 84.0 + unit(rng)),
        _ => {
            let (clon, clat) = centres[(rng.next_u64() % centres.len() as u64) as usize];
            let spread = [0.001, 0.05, 1.0][(rng.next_u64() % 3) as usize];
            (
                (clon + (unit(rng) - 0.5) * spread).clamp(-180.0, 180.0),
                (clat + (unit(rng) - 0.5) * spread).clamp(-85.0, 85.0),
            )
        }
    };
    (format!("{lon:.6}"), format!("{lat:.6}"))
}

/// One random search command on `key`.
fn random_search(rng: &mut Rng, key: &str, members: usize, centres: &[(f64, f64)]) -> Vec<String> {
    let pick = |rng: &mut Rng, from: &[&str]| {
        from[(rng.next_u64() % from.len() as u64) as usize].to_string()
    };
    let units = ["m", "km", "mi", "ft", "KM"];
    let (lon, lat) = random_point(rng, centres);
    let member = format!("p{}", rng.next_u64() % (members as u64 + 2));
    let radius = |rng: &mut Rng| {
        let scale = [0.0, 0.01, 1.0, 10.0, 100.0, 1000.0, 5000.0][(rng.next_u64() % 7) as usize];
        format!("{}", (rng.next_u64() % 1000) as f64 / 100.0 * scale)
    };
    let mut args: Vec<String> = Vec::new();
    let variant = rng.next_u64() % 6;
    match variant {
        0 => args.extend([
            "GEORADIUS".into(),
            key.into(),
            lon.clone(),
            lat.clone(),
            radius(rng),
            pick(rng, &units),
        ]),
        1 => args.extend([
            "GEORADIUSBYMEMBER_RO".into(),
            key.into(),
            member.clone(),
            radius(rng),
            pick(rng, &units),
        ]),
        2 => args.extend(["GEOSEARCHSTORE".into(), "dst".into(), key.into()]),
        _ => args.extend(["GEOSEARCH".into(), key.into()]),
    }
    if variant >= 2 {
        if rng.next_u64().is_multiple_of(2) {
            args.extend(["FROMMEMBER".into(), member]);
        } else {
            args.extend(["FROMLONLAT".into(), lon, lat]);
        }
        if rng.next_u64().is_multiple_of(2) {
            args.extend(["BYRADIUS".into(), radius(rng), pick(rng, &units)]);
        } else {
            args.extend(["BYBOX".into(), radius(rng), radius(rng), pick(rng, &units)]);
        }
    }
    match rng.next_u64() % 4 {
        0 => args.push("ASC".into()),
        1 => args.push("DESC".into()),
        _ => {}
    }
    if rng.next_u64().is_multiple_of(3) {
        args.extend(["COUNT".into(), (1 + rng.next_u64() % 12).to_string()]);
        if rng.next_u64().is_multiple_of(3) {
            args.push("ANY".into());
        }
    }
    if variant == 2 {
        if rng.next_u64().is_multiple_of(2) {
            args.push("STOREDIST".into());
        }
    } else {
        for opt in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
            if rng.next_u64().is_multiple_of(2) {
                args.push(opt.into());
            }
        }
    }
    args
}

/// Seeded random geo sets (listpack and skiplist sizes) and random
/// searches of every kind, every reply compared with redis-server; a
/// stored result is compared with ZRANGE … WITHSCORES.
fn random_searches(resp3: bool, seed: u64) {
    let mut p = Pair::new();
    if resp3 {
        p.resp3();
    }
    let mut rng = Rng::with_seed(seed);
    for (round, members) in [20usize, 100, 300].into_iter().enumerate() {
        let key = format!("g{round}");
        let centres: Vec<(f64, f64)> = (0..3)
            .map(|_| {
                (
                    (rng.next_u64() % 3500) as f64 / 10.0 - 175.0,
                    (rng.next_u64() % 1600) as f64 / 10.0 - 80.0,
                )
            })
            .collect();
        let mut add = vec!["GEOADD".to_string(), key.clone()];
        for i in 0..members {
            let (lon, lat) = random_point(&mut rng, &centres);
            add.extend([lon, lat, format!("p{i}")]);
        }
        let refs: Vec<&str> = add.iter().map(String::as_str).collect();
        p.check(&refs);
        for _ in 0..150 {
            let search = random_search(&mut rng, &key, members, &centres);
            let refs: Vec<&str> = search.iter().map(String::as_str).collect();
            p.check(&refs);
            if search[0] == "GEOSEARCHSTORE" {
                p.check(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]);
            }
        }
        let member = format!("p{}", rng.next_u64() % members as u64);
        p.check(&["GEOPOS", &key, &member, "p0", "nope"]);
        p.check(&["GEOHASH", &key, &member, "p0", "nope"]);
        p.check(&["GEODIST", &key, &member, "p0", "km"]);
    }
}

#[test]
fn random_searches_match_redis_resp2() {
    random_searches(false, test_seed());
}

#[test]
fn random_searches_match_redis_resp3() {
    random_searches(true, test_seed().wrapping_add(1));
}

/// Geo commands inside MULTI and a script: GEOPOS's RESP3 doubles as a
/// script sees them, GEOADD's rewrite to ZADD invisible to the caller.
const SCRIPTED: &str = r#"
GEOADD s 13.361389 38.115556 Palermo
EVAL "return redis.call('GEOPOS', KEYS[1], 'Palermo', 'x')" 1 s
EVAL "redis.setresp(3); return redis.call('GEOPOS', KEYS[1], 'Palermo')" 1 s
EVAL "return redis.call('GEOADD', KEYS[1], 'CH', 15.087269, 37.502669, 'Catania')" 1 s
EVAL "return redis.call('GEOSEARCH', KEYS[1], 'FROMMEMBER', 'Palermo', 'BYRADIUS', 200, 'km', 'WITHDIST', 'WITHCOORD', 'ASC')" 1 s
EVAL "return redis.call('GEOADD', KEYS[1], 500, 1, 'x')" 1 s
MULTI
GEOADD s 1 1 one
GEOPOS s one
GEODIST s one Palermo km
EXEC
"#;

#[test]
fn in_scripts_and_transactions() {
    check_both_protocols(SCRIPTED);
}
