//! Geo commands (Redis's `geo.c`): GEOADD, GEODIST, GEOHASH, GEOPOS,
//! GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their `_RO`
//! forms, byte for byte as Redis 7.0.
//!
//! A geo set is a sorted set whose scores are 52-bit geohashes
//! ([`crate::types::geohash`]). Replies follow Redis's formatting:
//! distances with 4 decimals (`fixedpoint_d2string`, a bulk string in
//! both protocols), coordinates as `%.17Lf` without trailing zeros
//! ([`Reply::HumanDouble`]: a bulk string in RESP2, a double in RESP3).
//!
//! Logged effects, as Redis propagates them:
//! - GEOADD runs ZADD with the computed scores and is logged as that
//!   `zadd key [options] score member …` (lower-case `zadd`, as Redis
//!   rewrites the command vector), when it changed anything.
//! - GEOSEARCHSTORE and the STORE/STOREDIST forms of GEORADIUS* are logged
//!   as received when they store or delete the destination.

mod search;

use super::{is, CmdResult, CommandSpec, Ctx, NOT_FLOAT_ERR};
use crate::reply::Reply;
use crate::types::geohash::{self, Shape, ShapeKind};
use crate::types::num::parse_f64;
use crate::types::{Value, WRONGTYPE};

use search::{search, sort_points, Sort};

/// A geo command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "geo", handler)
}

/// The geo family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("geoadd", geoadd),
    spec("geodist", geodist),
    spec("geohash", geohash_command),
    spec("geopos", geopos),
    spec("georadius", georadius),
    spec("georadius_ro", georadius_ro),
    spec("georadiusbymember", georadiusbymember),
    spec("georadiusbymember_ro", georadiusbymember_ro),
    spec("geosearch", geosearch),
    spec("geosearchstore", geosearchstore),
];

// ---------------------------------------------------------------------------
// Argument parsing (Redis's `extract*OrReply` helpers).

/// `extractLongLatOrReply`: a longitude and a latitude within the geo
/// limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], Reply> {
    let x = parse_f64(lon).ok_or(Reply::err(NOT_FLOAT_ERR))?;
    let y = parse_f64(lat).ok_or(Reply::err(NOT_FLOAT_ERR))?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&x)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y)
    {
        return Err(Reply::error(format!(
            "ERR invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok([x, y])
}

/// `extractUnitOrReply`: meters per unit.
fn unit(arg: &[u8]) -> Result<f64, Reply> {
    if is(arg, "m") {
        Ok(1.0)
    } else if is(arg, "km") {
        Ok(1000.0)
    } else if is(arg, "ft") {
        Ok(0.3048)
    } else if is(arg, "mi") {
        Ok(1609.34)
    } else {
        Err(Reply::err(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// `extractDistanceOrReply`: `<radius> <unit>` as (radius, conversion).
fn radius_unit(radius: &[u8], unit_arg: &[u8]) -> Result<(f64, f64), Reply> {
    let r = parse_f64(radius).ok_or(Reply::err("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(Reply::err("ERR radius cannot be negative"));
    }
    Ok((r, unit(unit_arg)?))
}

/// `extractBoxOrReply`: `<width> <height> <unit>` as (width, height,
/// conversion).
fn box_unit(width: &[u8], height: &[u8], unit_arg: &[u8]) -> Result<(f64, f64, f64), Reply> {
    let w = parse_f64(width).ok_or(Reply::err("ERR need numeric width"))?;
    let h = parse_f64(height).ok_or(Reply::err("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(unit_arg)?))
}

/// The score of `member` in the sorted set under `key`, which the caller
/// already looked up (no second lookup: keyspace statistics count one).
fn member_score(ctx: &mut Ctx, key: &[u8], member: &[u8]) -> Option<f64> {
    match ctx.db().get(key) {
        Some(Value::ZSet(z)) => z.score(member),
        _ => None,
    }
}

/// Redis's `addReplyDoubleDistance`: 4 decimals, a bulk string.
fn distance_reply(d: f64) -> Reply {
    Reply::Bulk(geohash::fixed_point(d, 4).into_bytes())
}

/// A `[longitude, latitude]` pair as GEOPOS and WITHCOORD send it.
fn coords_reply(xy: [f64; 2]) -> Reply {
    Reply::Array(vec![Reply::HumanDouble(xy[0]), Reply::HumanDouble(xy[1])])
}

// ---------------------------------------------------------------------------
// GEOADD, GEODIST, GEOHASH, GEOPOS.

/// GEOADD key [NX|XX] [CH] lon lat member …: ZADD with the geohash scores
/// (`geoaddCommand`), logged as that ZADD.
fn geoadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (mut xx, mut nx) = (false, false);
    let mut longidx = 2;
    while longidx < argv.len() {
        let opt = argv[longidx];
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if !is(opt, "ch") {
            break;
        }
        longidx += 1;
    }
    let rest = argv.len() - longidx;
    if !rest.is_multiple_of(3) || (xx && nx) {
        return super::syntax_error();
    }
    let mut zadd: Vec<Vec<u8>> = Vec::with_capacity(longidx + rest / 3 * 2);
    zadd.push(b"zadd".to_vec());
    zadd.extend(argv[1..longidx].iter().map(|a| a.to_vec()));
    for triple in argv[longidx..].chunks_exact(3) {
        let [x, y] = lon_lat(triple[0], triple[1])?;
        zadd.push(geohash::score_of(x, y).to_string().into_bytes());
        zadd.push(triple[2].to_vec());
    }
    let zadd_spec = super::table().get("zadd").expect("ZADD is in the table");
    let args: Vec<&[u8]> = zadd.iter().map(Vec::as_slice).collect();
    let dirty_before = ctx.dirty;
    let reply = (zadd_spec.handler)(ctx, &args)?;
    if ctx.dirty > dirty_before {
        ctx.log(zadd);
    }
    Ok(reply)
}

/// GEODIST key member1 member2 [unit].
fn geodist(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut to_meter = 1.0;
    if argv.len() == 5 {
        to_meter = unit(argv[4])?;
    } else if argv.len() > 5 {
        return super::syntax_error();
    }
    let Some(z) = ctx.read_zset(argv[1])? else {
        return Ok(Reply::Null);
    };
    let (Some(s1), Some(s2)) = (z.score(argv[2]), z.score(argv[3])) else {
        return Ok(Reply::Null);
    };
    let [x1, y1] = geohash::decode_score(s1);
    let [x2, y2] = geohash::decode_score(s2);
    Ok(distance_reply(geohash::distance(x1, y1, x2, y2) / to_meter))
}

/// GEOHASH key member …: 11-character standard geohashes.
fn geohash_command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let z = ctx.read_zset(argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => Reply::Bulk(geohash::standard_geohash(score).to_vec()),
                None => Reply::Null,
            })
            .collect(),
    ))
}

/// GEOPOS key member …: `[longitude, latitude]` pairs.
fn geopos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let z = ctx.read_zset(argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => coords_reply(geohash::decode_score(score)),
                None => Reply::NullArray,
            })
            .collect(),
    ))
}

// ---------------------------------------------------------------------------
// The searches (`georadiusGeneric`).

/// Which search command runs: Redis's `RADIUS_*`/`GEOSEARCH*` flags.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS (`ro`: GEORADIUS_RO, no STORE).
    Radius { ro: bool },
    /// GEORADIUSBYMEMBER (`ro`: the `_RO` form).
    ByMember { ro: bool },
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

impl Variant {
    fn is_search(self) -> bool {
        matches!(self, Variant::Search | Variant::SearchStore)
    }

    /// STORE and STOREDIST with a key are accepted (GEORADIUS* without
    /// `_RO`).
    fn takes_store_key(self) -> bool {
        matches!(
            self,
            Variant::Radius { ro: false } | Variant::ByMember { ro: false }
        )
    }
}

fn georadius(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Variant::Radius { ro: false })
}

fn georadius_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Variant::Radius { ro: true })
}

fn georadiusbymember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Variant::ByMember { ro: false })
}

fn georadiusbymember_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Variant::ByMember { ro: true })
}

fn geosearch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 1, Variant::Search)
}

fn geosearchstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    georadius_generic(ctx, argv, 2, Variant::SearchStore)
}

const COULD_NOT_DECODE: &str = "ERR could not decode requested zset member";

/// The options of a search, as parsed.
#[derive(Default)]
struct Options<'a> {
    store_key: Option<&'a [u8]>,
    store_dist: bool,
    withdist: bool,
    withhash: bool,
    withcoords: bool,
    frommember: bool,
    fromloc: bool,
    byradius: bool,
    bybox: bool,
    sort: Sort,
    any: bool,
    count: i64,
}

/// `georadiusGeneric`: every search command, with Redis's order of checks
/// (the first failing one decides the error).
fn georadius_generic(ctx: &mut Ctx, argv: &[&[u8]], src_idx: usize, variant: Variant) -> CmdResult {
    let src = argv[src_idx];
    let exists = match ctx.lookup_read(src) {
        None => false,
        Some(Value::ZSet(_)) => true,
        Some(_) => return Err(Reply::err(WRONGTYPE)),
    };
    let mut shape = Shape {
        xy: [0.0, 0.0],
        conversion: 0.0,
        kind: ShapeKind::Circle { radius: 0.0 },
    };
    let mut o = Options::default();
    let base_args = match variant {
        Variant::Radius { .. } => {
            shape.xy = lon_lat(argv[2], argv[3])?;
            let (radius, conversion) = radius_unit(argv[4], argv[5])?;
            shape.kind = ShapeKind::Circle { radius };
            shape.conversion = conversion;
            6
        }
        Variant::ByMember { .. } if !exists => 5,
        Variant::ByMember { .. } => {
            let score = member_score(ctx, src, argv[2]).ok_or(Reply::err(COULD_NOT_DECODE))?;
            shape.xy = geohash::decode_score(score);
            let (radius, conversion) = radius_unit(argv[3], argv[4])?;
            shape.kind = ShapeKind::Circle { radius };
            shape.conversion = conversion;
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            o.store_key = Some(argv[1]);
            3
        }
    };
    parse_options(ctx, argv, base_args, variant, exists, &mut shape, &mut o)?;

    if o.store_key.is_some() && (o.withdist || o.withhash || o.withcoords) {
        return Err(Reply::error(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if variant == Variant::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    let name = String::from_utf8_lossy(argv[0]);
    if variant.is_search() && !(o.frommember || o.fromloc) {
        return Err(Reply::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if variant.is_search() && !(o.byradius || o.bybox) {
        return Err(Reply::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if o.any && o.count == 0 {
        return Err(Reply::err("ERR the ANY argument requires COUNT argument"));
    }

    if !exists {
        return Ok(match o.store_key {
            Some(dst) => {
                if ctx.delete_key(dst) {
                    ctx.dirty(1);
                }
                Reply::Int(0)
            }
            None => Reply::Array(Vec::new()),
        });
    }

    if o.count != 0 && o.sort == Sort::None && !o.any {
        o.sort = Sort::Asc;
    }
    let limit = if o.any { o.count as usize } else { 0 };
    let mut points = match ctx.db().get(src) {
        Some(Value::ZSet(z)) => search(z, &shape, limit),
        _ => unreachable!("looked up above"),
    };
    if points.is_empty() && o.store_key.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let result_length = points.len();
    let returned = if o.count == 0 || (result_length as i64) < o.count {
        result_length
    } else {
        o.count as usize
    };
    sort_points(&mut points, o.sort, returned);
    points.truncate(returned);
    for p in &mut points {
        p.dist /= shape.conversion;
    }

    let Some(dst) = o.store_key else {
        let options = usize::from(o.withdist) + usize::from(o.withcoords) + usize::from(o.withhash);
        let items = points
            .into_iter()
            .map(|p| {
                if options == 0 {
                    return Reply::Bulk(p.member);
                }
                let mut item = Vec::with_capacity(options + 1);
                item.push(Reply::Bulk(p.member));
                if o.withdist {
                    item.push(distance_reply(p.dist));
                }
                if o.withhash {
                    item.push(Reply::Int(search::c_long_long(p.score)));
                }
                if o.withcoords {
                    item.push(coords_reply(p.xy));
                }
                Reply::Array(item)
            })
            .collect();
        return Ok(Reply::Array(items));
    };
    if returned > 0 {
        let store_dist = o.store_dist;
        search::store(ctx, dst, points, store_dist);
        let event = if variant.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        ctx.notify(crate::core::notify::ZSET, event, dst);
        ctx.dirty(returned as u64);
    } else if ctx.delete_key(dst) {
        ctx.dirty(1);
    }
    Ok(Reply::Int(returned as i64))
}

/// The options loop of `georadiusGeneric`, from `argv[base_args]` on.
fn parse_options<'a>(
    ctx: &mut Ctx,
    argv: &[&'a [u8]],
    base_args: usize,
    variant: Variant,
    exists: bool,
    shape: &mut Shape,
    o: &mut Options<'a>,
) -> Result<(), Reply> {
    let src = argv[if variant == Variant::SearchStore {
        2
    } else {
        1
    }];
    let remaining = argv.len().saturating_sub(base_args);
    let arg_at = |i: usize| argv[base_args + i];
    let mut i = 0;
    while i < remaining {
        let arg = arg_at(i);
        if is(arg, "withdist") {
            o.withdist = true;
        } else if is(arg, "withhash") {
            o.withhash = true;
        } else if is(arg, "withcoord") {
            o.withcoords = true;
        } else if is(arg, "any") {
            o.any = true;
        } else if is(arg, "asc") {
            o.sort = Sort::Asc;
        } else if is(arg, "desc") {
            o.sort = Sort::Desc;
        } else if is(arg, "count") && i + 1 < remaining {
            o.count = super::parse_int(arg_at(i + 1))?;
            if o.count <= 0 {
                return Err(Reply::err("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist"))
            && i + 1 < remaining
            && variant.takes_store_key()
        {
            o.store_key = Some(arg_at(i + 1));
            o.store_dist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && variant == Variant::SearchStore {
            o.store_dist = true;
        } else if is(arg, "frommember") && i + 1 < remaining && variant.is_search() && !o.fromloc {
            if exists {
                let score =
                    member_score(ctx, src, arg_at(i + 1)).ok_or(Reply::err(COULD_NOT_DECODE))?;
                shape.xy = geohash::decode_score(score);
            }
            o.frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && i + 2 < remaining && variant.is_search() && !o.frommember
        {
            shape.xy = lon_lat(arg_at(i + 1), arg_at(i + 2))?;
            o.fromloc = true;
            i += 2;
        } else if is(arg, "byradius") && i + 2 < remaining && variant.is_search() && !o.bybox {
            let (radius, conversion) = radius_unit(arg_at(i + 1), arg_at(i + 2))?;
            shape.kind = ShapeKind::Circle { radius };
            shape.conversion = conversion;
            o.byradius = true;
            i += 2;
        } else if is(arg, "bybox") && i + 3 < remaining && variant.is_search() && !o.byradius {
            let (width, height, conversion) =
                box_unit(arg_at(i + 1), arg_at(i + 2), arg_at(i + 3))?;
            shape.kind = ShapeKind::Rect { width, height };
            shape.conversion = conversion;
            o.bybox = true;
            i += 3;
        } else {
            return super::syntax_error();
        }
        i += 1;
    }
    Ok(())
}
