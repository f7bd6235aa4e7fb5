//! Header, footer, trailer.

use super::decode::parse_block_header;
use super::encode::{le_u16, le_u32, le_u64, put_bytes, put_varint, put_zigzag, Malformed, Reader};
use super::error::SnapshotError;
use super::format::{
    BLOCK_HEADER_LEN, FILE_ID_MASK, FLAG_ACCESS, FLAG_FUNCTIONS, FLAG_LZ4, FLAG_STREAM_NODES,
    FOOTER_MAGIC, FORMAT_MAJOR, HEADER_FIXED_LEN, HEADER_MIN_LEN, KNOWN_FLAGS, MAGIC,
    MINOR_WITH_POSITION, POSITION_FIELDS_LEN, TRAILER_LEN, TRAILER_MAGIC,
};
use super::stats::{BlockInfo, DbStats, HeaderInfo, Largest, Summary, TypeStats};
use crate::repl::ids::{Position, ReplId, REPLID_LEN};

pub(super) fn encode_header(info: &HeaderInfo, file_id: u32) -> Vec<u8> {
    let version = info.engine_version.as_bytes();
    let version = &version[..version.len().min(255)];
    let minor = info.format_minor();
    let position_len = match info.position {
        Some(_) => 1 + POSITION_FIELDS_LEN,
        None if minor >= MINOR_WITH_POSITION => 1,
        None => 0,
    };
    let mut flags = FLAG_LZ4 | FLAG_STREAM_NODES;
    if !info.functions.is_empty() {
        flags |= FLAG_FUNCTIONS;
    }
    if info.key_access != crate::rdb::writer::KeyAccessRecord::None {
        flags |= FLAG_ACCESS;
    }
    let header_len = HEADER_FIXED_LEN + version.len() + position_len + 4;
    let mut out = Vec::with_capacity(header_len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&minor.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(header_len as u32).to_le_bytes());
    out.extend_from_slice(&info.created_ms.to_le_bytes());
    out.extend_from_slice(&info.databases.to_le_bytes());
    out.extend_from_slice(&(file_id & FILE_ID_MASK).to_le_bytes());
    out.push(version.len() as u8);
    out.extend_from_slice(version);
    // Format 1.2: the position, only when there is one (a file without
    // one stays 1.1, byte for byte).
    if let Some(p) = &info.position {
        out.push(1);
        out.extend_from_slice(p.replid.as_bytes());
        out.extend_from_slice(&p.offset.to_le_bytes());
        out.extend_from_slice(&p.stream_db.to_le_bytes());
    } else if minor >= MINOR_WITH_POSITION {
        out.push(0);
    }
    debug_assert_eq!(out.len() + 4, header_len);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A verified header.
#[derive(Debug, Clone)]
pub(super) struct Header {
    pub(super) len: usize,
    pub(super) info: HeaderInfo,
    pub(super) file_id: u32,
}

pub(super) fn read_header(data: &[u8]) -> Result<Header, SnapshotError> {
    if data.len() < 8 || data[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot(format!(
            "the file ({} bytes) does not start with the snapshot magic",
            data.len()
        )));
    }
    if data.len() < 20 {
        return Err(SnapshotError::Truncated {
            file_len: data.len() as u64,
            detail: "the file ends inside the header".into(),
        });
    }
    let header_len = le_u32(data, 16) as usize;
    // A version string of 255 bytes plus room for later minor versions.
    if !(HEADER_MIN_LEN..=HEADER_FIXED_LEN + 255 + 4 + 4096).contains(&header_len) {
        return Err(SnapshotError::Header {
            offset: 16,
            detail: format!("impossible header length {header_len}"),
        });
    }
    if header_len > data.len() {
        return Err(SnapshotError::Truncated {
            file_len: data.len() as u64,
            detail: format!("the file ends inside the {header_len}-byte header"),
        });
    }
    let stored = le_u32(data, header_len - 4);
    let computed = crc32fast::hash(&data[..header_len - 4]);
    if stored != computed {
        return Err(SnapshotError::Header {
            offset: 0,
            detail: format!("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        });
    }
    let (major, minor) = (le_u16(data, 8), le_u16(data, 10));
    if major != FORMAT_MAJOR {
        return Err(SnapshotError::UnsupportedVersion { major, minor });
    }
    let flags = le_u32(data, 12);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(SnapshotError::UnsupportedFlags { flags });
    }
    let version_len = data[36] as usize;
    if HEADER_FIXED_LEN + version_len + 4 > header_len {
        return Err(SnapshotError::Header {
            offset: 36,
            detail: "engine version runs past the header".into(),
        });
    }
    let position = if minor >= MINOR_WITH_POSITION {
        read_position(data, HEADER_FIXED_LEN + version_len, header_len - 4)?
    } else {
        // 1.0 and 1.1 define nothing after the engine version: whatever
        // is there is skipped (the version rules).
        None
    };
    Ok(Header {
        len: header_len,
        file_id: le_u32(data, 32) & FILE_ID_MASK,
        info: HeaderInfo {
            created_ms: le_u64(data, 20) as i64,
            databases: le_u32(data, 28),
            engine_version: String::from_utf8_lossy(
                &data[HEADER_FIXED_LEN..HEADER_FIXED_LEN + version_len],
            )
            .into_owned(),
            position,
            functions: Vec::new(),
            key_access: crate::rdb::writer::KeyAccessRecord::None,
        },
    })
}

/// Reads format 1.2's position fields at `at`, which must end by `end`
/// (where the header's CRC starts); bytes after them (a later minor
/// version's fields) are skipped. Damage is the header's error.
fn read_position(data: &[u8], at: usize, end: usize) -> Result<Option<Position>, SnapshotError> {
    let damaged = |offset: usize, detail: String| SnapshotError::Header {
        offset: offset as u64,
        detail,
    };
    if at >= end {
        return Err(damaged(
            at,
            "the replication position's presence byte runs past the header".into(),
        ));
    }
    match data[at] {
        0 => return Ok(None),
        1 => {}
        other => {
            return Err(damaged(
                at,
                format!("bad replication position presence byte {other}"),
            ))
        }
    }
    let fields = at + 1;
    if fields + POSITION_FIELDS_LEN > end {
        return Err(damaged(
            fields,
            "the replication position runs past the header".into(),
        ));
    }
    let replid = ReplId::parse(&data[fields..fields + REPLID_LEN]).ok_or_else(|| {
        damaged(
            fields,
            "the replication id is not 40 hexadecimal digits".into(),
        )
    })?;
    let offset = le_u64(data, fields + REPLID_LEN) as i64;
    if offset < 0 {
        return Err(damaged(
            fields + REPLID_LEN,
            format!("negative replication offset {offset}"),
        ));
    }
    Ok(Some(Position {
        replid,
        offset,
        stream_db: le_u32(data, fields + REPLID_LEN + 8),
    }))
}

pub(super) fn encode_footer(summary: &Summary) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + summary.blocks.len() * 24);
    out.extend_from_slice(&FOOTER_MAGIC);
    put_zigzag(&mut out, summary.created_ms);
    put_varint(&mut out, u64::from(summary.databases));
    put_bytes(&mut out, summary.engine_version.as_bytes());
    let st = &summary.stats;
    put_varint(&mut out, st.keys);
    put_varint(&mut out, st.expiring_keys);
    for m in [st.min_expire_ms, st.max_expire_ms] {
        match m {
            Some(at) => {
                out.push(1);
                put_zigzag(&mut out, at);
            }
            None => out.push(0),
        }
    }
    put_varint(&mut out, summary.raw_bytes);
    put_varint(&mut out, summary.stored_bytes);
    put_varint(&mut out, st.split_values);
    put_varint(&mut out, st.dbs.len() as u64);
    for (db, d) in &st.dbs {
        put_varint(&mut out, *db as u64);
        put_varint(&mut out, d.keys);
        put_varint(&mut out, d.expiring_keys);
    }
    put_varint(&mut out, st.types.len() as u64);
    for (tag, t) in st.types.iter().enumerate() {
        out.push(tag as u8);
        put_varint(&mut out, t.keys);
        put_varint(&mut out, t.elements);
        put_varint(&mut out, t.bytes);
        match &t.largest {
            Some(l) => {
                out.push(1);
                put_varint(&mut out, l.db as u64);
                put_varint(&mut out, l.key_len);
                put_bytes(&mut out, &l.key_prefix);
                put_varint(&mut out, l.bytes);
                put_varint(&mut out, l.elements);
            }
            None => out.push(0),
        }
    }
    put_varint(&mut out, summary.blocks.len() as u64);
    for b in &summary.blocks {
        put_varint(&mut out, b.offset);
        put_varint(&mut out, b.stored_len);
        put_varint(&mut out, b.raw_len);
        put_varint(&mut out, u64::from(b.records));
        out.push(b.codec);
        out.extend_from_slice(&b.payload_crc.to_le_bytes());
    }
    // Format 1.3: the function libraries, only when there are some (a
    // file without them is byte for byte what 1.2 wrote).
    if !summary.functions.is_empty() {
        put_varint(&mut out, summary.functions.len() as u64);
        for code in &summary.functions {
            put_bytes(&mut out, code);
        }
    }
    out
}

pub(super) fn decode_footer(footer: &[u8], summary: &mut Summary) -> Result<(), Malformed> {
    let mut r = Reader::new(footer);
    if r.array::<4>()? != FOOTER_MAGIC {
        return Err("footer magic missing");
    }
    summary.created_ms = r.zigzag()?;
    summary.databases = u32::try_from(r.varint()?).map_err(|_| "database count too large")?;
    summary.engine_version = String::from_utf8_lossy(r.bytes()?).into_owned();
    let st = &mut summary.stats;
    st.keys = r.varint()?;
    st.expiring_keys = r.varint()?;
    let mut expire = [None, None];
    for slot in &mut expire {
        *slot = match r.u8()? {
            0 => None,
            1 => Some(r.zigzag()?),
            _ => return Err("bad presence byte"),
        };
    }
    [st.min_expire_ms, st.max_expire_ms] = expire;
    summary.raw_bytes = r.varint()?;
    summary.stored_bytes = r.varint()?;
    st.split_values = r.varint()?;
    let db_count = r.varint()?;
    for _ in 0..db_count {
        let db = usize::try_from(r.varint()?).map_err(|_| "database number too large")?;
        let keys = r.varint()?;
        let expiring_keys = r.varint()?;
        if st
            .dbs
            .insert(
                db,
                DbStats {
                    keys,
                    expiring_keys,
                },
            )
            .is_some()
        {
            return Err("database listed twice");
        }
    }
    let type_count = r.varint()?;
    for _ in 0..type_count {
        let tag = r.u8()? as usize;
        let keys = r.varint()?;
        let elements = r.varint()?;
        let bytes = r.varint()?;
        let largest = match r.u8()? {
            0 => None,
            1 => Some(Largest {
                db: usize::try_from(r.varint()?).map_err(|_| "database number too large")?,
                key_len: r.varint()?,
                key_prefix: r.bytes()?.to_vec(),
                bytes: r.varint()?,
                elements: r.varint()?,
            }),
            _ => return Err("bad presence byte"),
        };
        // Types a later minor version adds are skipped.
        if let Some(t) = st.types.get_mut(tag) {
            *t = TypeStats {
                keys,
                elements,
                bytes,
                largest,
            };
        }
    }
    let block_count = r.varint()?;
    // At least 9 bytes per index entry: bound the reservation by them.
    summary.blocks = Vec::with_capacity((block_count as usize).min(r.remaining() / 9));
    for _ in 0..block_count {
        let offset = r.varint()?;
        let stored_len = r.varint()?;
        let raw_len = r.varint()?;
        let records = u32::try_from(r.varint()?).map_err(|_| "record count too large")?;
        let codec = r.u8()?;
        let payload_crc = r.u32_le()?;
        summary.blocks.push(BlockInfo {
            offset,
            stored_len,
            raw_len,
            records,
            codec,
            payload_crc,
        });
    }
    // Format 1.3's libraries, when the footer goes on (a 1.3 file without
    // libraries, and every older file, ends here).
    if r.remaining() > 0 {
        let count = r.varint()?;
        for _ in 0..count {
            summary.functions.push(r.bytes()?.to_vec());
        }
    }
    Ok(())
}

pub(super) fn encode_trailer(footer_offset: u64, footer: &[u8], minor: u16) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0..8].copy_from_slice(&footer_offset.to_le_bytes());
    t[8..16].copy_from_slice(&(footer.len() as u64).to_le_bytes());
    t[16..20].copy_from_slice(&crc32fast::hash(footer).to_le_bytes());
    t[20..22].copy_from_slice(&FORMAT_MAJOR.to_le_bytes());
    t[22..24].copy_from_slice(&minor.to_le_bytes());
    let crc = crc32fast::hash(&t[..24]);
    t[24..28].copy_from_slice(&crc.to_le_bytes());
    t[28..36].copy_from_slice(&TRAILER_MAGIC);
    t
}

/// Reads trailer and footer: the summary, without touching blocks.
///
/// Fails when the file has no valid trailer (truncated, or its end
/// damaged), when the footer's checksum fails, or when the format's
/// major version is unknown.
pub fn read_summary(data: &[u8]) -> Result<Summary, SnapshotError> {
    let file_len = data.len() as u64;
    if data.len() < TRAILER_LEN || data[data.len() - 8..] != TRAILER_MAGIC {
        let detail = if data.len() >= 8 && data[..8] == MAGIC {
            "the trailer magic is missing"
        } else {
            "neither the snapshot magic nor a trailer was found"
        };
        return Err(SnapshotError::Truncated {
            file_len,
            detail: detail.into(),
        });
    }
    let at = data.len() - TRAILER_LEN;
    let t = &data[at..];
    let stored = le_u32(t, 24);
    let computed = crc32fast::hash(&t[..24]);
    if stored != computed {
        return Err(SnapshotError::Trailer {
            offset: at as u64,
            detail: format!("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        });
    }
    let (major, minor) = (le_u16(t, 20), le_u16(t, 22));
    if major != FORMAT_MAJOR {
        return Err(SnapshotError::UnsupportedVersion { major, minor });
    }
    let footer_offset = le_u64(t, 0);
    let footer_len = le_u64(t, 8);
    if footer_offset.checked_add(footer_len) != Some(at as u64) {
        return Err(SnapshotError::Trailer {
            offset: at as u64,
            detail: format!(
                "footer at {footer_offset} of {footer_len} bytes does not end where the trailer starts ({at})"
            ),
        });
    }
    let footer = &data[footer_offset as usize..at];
    let footer_err = |detail: String| SnapshotError::Footer {
        offset: footer_offset,
        len: footer_len,
        detail,
    };
    let stored = le_u32(t, 16);
    let computed = crc32fast::hash(footer);
    if stored != computed {
        return Err(footer_err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    let mut summary = Summary {
        format_major: major,
        format_minor: minor,
        file_len,
        footer_offset,
        footer_len,
        ..Summary::default()
    };
    decode_footer(footer, &mut summary).map_err(|e| footer_err(e.to_string()))?;
    Ok(summary)
}

/// The length of the snapshot image at the start of `data`, which may go
/// on with other bytes (an AOF whose preamble is a snapshot). Walks the
/// block headers from the end of the header to the footer, then finds the
/// trailer: the first position at or after the footer where a trailer
/// with a valid checksum points back at that footer. Only framing is
/// checked here; loading the image verifies the rest.
pub fn image_len(data: &[u8]) -> Result<usize, SnapshotError> {
    let header = read_header(data)?;
    let mut at = header.len as u64;
    loop {
        let pos = usize::try_from(at).unwrap_or(usize::MAX);
        if data.len().saturating_sub(pos) >= 4 && data[pos..pos + 4] == FOOTER_MAGIC {
            break;
        }
        let block = parse_block_header(data, at).map_err(|damage| SnapshotError::Block {
            index: 0,
            offset: at,
            keys: 0,
            damage,
        })?;
        at = at
            .checked_add(BLOCK_HEADER_LEN as u64)
            .and_then(|a| a.checked_add(block.info.stored_len))
            .filter(|a| *a <= data.len() as u64)
            .ok_or_else(|| SnapshotError::Truncated {
                file_len: data.len() as u64,
                detail: format!("the block at {at} runs past the end of the data"),
            })?;
    }
    let footer_offset = at as usize;
    let mut from = footer_offset;
    while let Some(found) = find_bytes(&data[from..], &TRAILER_MAGIC) {
        let magic_at = from + found;
        from = magic_at + 1;
        let Some(start) = (magic_at + TRAILER_MAGIC.len()).checked_sub(TRAILER_LEN) else {
            continue;
        };
        if start < footer_offset {
            continue;
        }
        let t = &data[start..start + TRAILER_LEN];
        if le_u32(t, 24) == crc32fast::hash(&t[..24])
            && le_u64(t, 0) == footer_offset as u64
            && le_u64(t, 8) == (start - footer_offset) as u64
        {
            return Ok(start + TRAILER_LEN);
        }
    }
    Err(SnapshotError::Truncated {
        file_len: data.len() as u64,
        detail: format!("no trailer found after the footer at {footer_offset}"),
    })
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Checks the index against the file: blocks contiguous from the end of
/// the header to the footer.
pub(super) fn check_index(header_len: usize, summary: &Summary) -> Result<(), SnapshotError> {
    let err = |detail: String| SnapshotError::Footer {
        offset: summary.footer_offset,
        len: summary.footer_len,
        detail,
    };
    let mut expected = header_len as u64;
    let mut records: u64 = 0;
    for (i, b) in summary.blocks.iter().enumerate() {
        if b.offset != expected {
            return Err(err(format!(
                "index puts block {i} at offset {}, where offset {expected} was expected",
                b.offset
            )));
        }
        expected = b.end();
        if expected > summary.footer_offset {
            return Err(err(format!(
                "index puts block {i} past the footer (ends at {expected})"
            )));
        }
        records += u64::from(b.records);
    }
    if expected != summary.footer_offset {
        return Err(err(format!(
            "blocks end at {expected} but the footer starts at {}",
            summary.footer_offset
        )));
    }
    if records < summary.stats.keys {
        return Err(err(format!(
            "index holds {records} records for {} keys",
            summary.stats.keys
        )));
    }
    Ok(())
}
