//! The byte layout of segment files (format version 1; `docs/format.md` draws it).
//!
//! A segment is a file named `{id:020}.seg` (the id in decimal, 20 digits, so names sort by id):
//!
//! ```text
//! segment header, SEGMENT_HEADER_LEN = 32 bytes:
//! offset  size  field
//! 0       8     magic       b"SJOURNAL"
//! 8       2     version     segment format version (1)
//! 10      2     reserved    0
//! 12      4     polynomial  the CRC-32 polynomial of every checksum in the file, normal form:
//!                           0x04C11DB7 (CRC-32/IEEE, as crc32fast computes it)
//! 16      8     segment id  the number in the file name
//! 24      4     crc         CRC-32 of bytes [0, 24)
//! 28      4     reserved    0
//!
//! then groups, back to back, to the end of the file. A group is what one write put down:
//!
//! group header, GROUP_HEADER_LEN = 24 bytes:
//! offset  size  field
//! 0       4     crc     CRC-32 of bytes [4, 24) of this header
//! 4       4     magic   0x5047_4A53 (b"SJGP" read little-endian)
//! 8       4     len     bytes of frames after this header (> 0)
//! 12      4     frames  number of frames in them (> 0)
//! 16      8     synced  how many bytes of this segment were durable (fdatasync returned) when
//!                       this group was written: every byte before `synced` was acknowledged
//!                       data, so damage there is corruption, never a torn write
//! 24      len   frames  batch frames of the codec (`stepjournal_codec::batch`), back to back
//! ```
//!
//! Frames carry their own checksums; the group header's checksum covers the header only.

use std::mem::size_of;

use stepjournal_codec::{DecodeError, FormatPart};

/// The segment file's first 8 bytes.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SJOURNAL";
/// The segment format version this build reads and writes.
pub const SEGMENT_VERSION: u16 = 1;
/// CRC-32/IEEE in normal form: the polynomial of every checksum in a segment.
pub const CRC32_IEEE_POLYNOMIAL: u32 = 0x04C1_1DB7;
/// Bytes of the segment header: magic, version, reserved, polynomial, id, crc, reserved.
pub const SEGMENT_HEADER_LEN: usize = size_of::<[u8; 8]>()
    + size_of::<u16>() * 2
    + size_of::<u32>()
    + size_of::<u64>()
    + size_of::<u32>() * 2;
/// The bytes of the segment header its checksum covers.
const SEGMENT_CRC_AT: usize =
    size_of::<[u8; 8]>() + size_of::<u16>() * 2 + size_of::<u32>() + size_of::<u64>();

/// The group header's magic number (b"SJGP" read as a little-endian u32).
pub const GROUP_MAGIC: u32 = u32::from_le_bytes(*b"SJGP");
/// Bytes of the group header: crc, magic, len, frames, synced.
pub const GROUP_HEADER_LEN: usize = size_of::<u32>() * 4 + size_of::<u64>();

/// The writer lock's file name in the journal directory.
pub const LOCK_FILE: &str = "LOCK";

/// A segment's id: the number in its file name, increasing with every new segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

impl SegmentId {
    /// The segment's file name.
    pub fn file_name(self) -> String {
        format!("{:020}.seg", self.0)
    }

    /// The id a segment file name carries, if the name is one.
    pub fn from_file_name(name: &str) -> Option<SegmentId> {
        let digits = name.strip_suffix(".seg")?;
        if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().map(SegmentId)
    }
}

impl std::fmt::Display for SegmentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.file_name())
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).and_then(|w| w.try_into().ok()).map(u16::from_le_bytes).unwrap_or(0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).and_then(|w| w.try_into().ok()).map(u32::from_le_bytes).unwrap_or(0)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0)
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fn malformed(reason: impl Into<String>) -> DecodeError {
    DecodeError::Malformed { reason: reason.into() }
}

/// The segment header for segment `id`.
pub fn encode_segment_header(id: SegmentId) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    put(&mut h, 0, &SEGMENT_MAGIC);
    put(&mut h, 8, &SEGMENT_VERSION.to_le_bytes());
    put(&mut h, 12, &CRC32_IEEE_POLYNOMIAL.to_le_bytes());
    put(&mut h, 16, &id.0.to_le_bytes());
    let crc = crc32fast::hash(h.get(..SEGMENT_CRC_AT).unwrap_or_default());
    put(&mut h, SEGMENT_CRC_AT, &crc.to_le_bytes());
    h
}

/// Checks a segment header (the file's first bytes) against the id its name carries.
pub fn check_segment_header(bytes: &[u8], id: SegmentId) -> Result<(), DecodeError> {
    let h = bytes.get(..SEGMENT_HEADER_LEN).ok_or(DecodeError::Truncated {
        needed: SEGMENT_HEADER_LEN as u64,
        available: bytes.len() as u64,
    })?;
    let stored = u32_at(h, SEGMENT_CRC_AT);
    let computed = crc32fast::hash(h.get(..SEGMENT_CRC_AT).unwrap_or_default());
    if stored != computed {
        return Err(DecodeError::ChecksumMismatch { stored, computed });
    }
    if h.get(..8) != Some(SEGMENT_MAGIC.as_slice()) {
        return Err(malformed("not a stepjournal segment (bad magic)"));
    }
    let version = u16_at(h, 8);
    if version > SEGMENT_VERSION {
        return Err(DecodeError::NewerVersion {
            part: FormatPart::Segment,
            version,
            newest: SEGMENT_VERSION,
        });
    }
    if version != SEGMENT_VERSION {
        return Err(malformed(format!(
            "segment format version {version} is not one this build reads ({SEGMENT_VERSION})"
        )));
    }
    let poly = u32_at(h, 12);
    if poly != CRC32_IEEE_POLYNOMIAL {
        return Err(malformed(format!("unknown checksum polynomial {poly:#010x}")));
    }
    let stored_id = u64_at(h, 16);
    if stored_id != id.0 {
        return Err(malformed(format!(
            "the header names segment {stored_id}, the file name {}",
            id.0
        )));
    }
    if u16_at(h, 10) != 0 || u32_at(h, 28) != 0 {
        return Err(malformed("reserved segment header bits are set"));
    }
    Ok(())
}

/// A group header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupHeader {
    /// Bytes of frames after the header.
    pub len: u32,
    /// Number of frames.
    pub frames: u32,
    /// Bytes of the segment durable when the group was written.
    pub synced: u64,
}

impl GroupHeader {
    /// Writes the header into `out` (its first [`GROUP_HEADER_LEN`] bytes).
    pub fn encode_into(&self, out: &mut [u8]) {
        let Some(h) = out.get_mut(..GROUP_HEADER_LEN) else { return };
        put(h, 4, &GROUP_MAGIC.to_le_bytes());
        put(h, 8, &self.len.to_le_bytes());
        put(h, 12, &self.frames.to_le_bytes());
        put(h, 16, &self.synced.to_le_bytes());
        let crc = crc32fast::hash(h.get(4..).unwrap_or_default());
        put(h, 0, &crc.to_le_bytes());
    }

    /// Whether `bytes` could start a group header: the magic is in place. Cheap, for searching.
    pub fn magic_at(bytes: &[u8]) -> bool {
        u32_at(bytes, 4) == GROUP_MAGIC && bytes.len() >= GROUP_HEADER_LEN
    }

    /// Parses and checks the group header at the start of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<GroupHeader, DecodeError> {
        let h = bytes.get(..GROUP_HEADER_LEN).ok_or(DecodeError::Truncated {
            needed: GROUP_HEADER_LEN as u64,
            available: bytes.len() as u64,
        })?;
        let stored = u32_at(h, 0);
        let computed = crc32fast::hash(h.get(4..).unwrap_or_default());
        if stored != computed {
            return Err(DecodeError::ChecksumMismatch { stored, computed });
        }
        if u32_at(h, 4) != GROUP_MAGIC {
            return Err(malformed("bad group magic"));
        }
        let g = GroupHeader { len: u32_at(h, 8), frames: u32_at(h, 12), synced: u64_at(h, 16) };
        if g.len == 0 || g.frames == 0 {
            return Err(malformed("an empty group"));
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trips_and_names_its_id() {
        let h = encode_segment_header(SegmentId(7));
        assert_eq!(h.len(), 32);
        check_segment_header(&h, SegmentId(7)).unwrap();
        let err = check_segment_header(&h, SegmentId(8)).unwrap_err();
        assert!(err.to_string().contains("segment 7"), "{err}");
        for i in 0..h.len() {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(check_segment_header(&bad, SegmentId(7)).is_err(), "flip at {i} passed");
        }
        assert!(check_segment_header(&h[..31], SegmentId(7)).is_err());
    }

    #[test]
    fn segment_header_bytes_are_as_docs_format_md_draws_them() {
        let expected: [u8; 32] = [
            0x53, 0x4A, 0x4F, 0x55, 0x52, 0x4E, 0x41, 0x4C, 0x01, 0x00, 0x00, 0x00, 0xB7, 0x1D,
            0xC1, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xDE, 0x5C, 0x3C, 0xF8,
            0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(encode_segment_header(SegmentId(1)), expected);
        assert_eq!(GROUP_MAGIC.to_le_bytes(), *b"SJGP");
    }

    #[test]
    fn group_header_round_trips_and_every_flip_is_caught() {
        let g = GroupHeader { len: 300, frames: 2, synced: 4096 };
        let mut b = [0u8; GROUP_HEADER_LEN];
        g.encode_into(&mut b);
        assert!(GroupHeader::magic_at(&b));
        assert_eq!(GroupHeader::parse(&b).unwrap(), g);
        for i in 0..b.len() {
            let mut bad = b;
            bad[i] ^= 0x01;
            assert!(GroupHeader::parse(&bad).is_err(), "flip at {i} passed");
        }
        assert!(GroupHeader::parse(&[0u8; GROUP_HEADER_LEN]).is_err(), "zeros are no header");
    }

    #[test]
    fn segment_file_names_sort_by_id_and_parse_back() {
        assert_eq!(SegmentId(42).file_name(), "00000000000000000042.seg");
        assert_eq!(SegmentId::from_file_name("00000000000000000042.seg"), Some(SegmentId(42)));
        for bad in ["42.seg", "0000000000000000004x.seg", "00000000000000000042.log", "LOCK"] {
            assert_eq!(SegmentId::from_file_name(bad), None, "{bad}");
        }
    }
}
