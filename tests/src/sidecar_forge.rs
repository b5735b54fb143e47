//! Reading and writing the file backend's sidecar indexes (`{id:020}.idx`) byte for byte, as
//! `docs/format.md` draws them, for tests that forge, trim or swap them.

/// One frame a sidecar describes, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideFrame {
    /// A deletion frame (else events).
    pub delete: bool,
    /// The session's name.
    pub session: String,
    /// The frame's first byte in the segment.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Events frames: the first sequence number.
    pub first: u64,
    /// Events frames: how many events.
    pub count: u64,
    /// Events frames: its last record's time.
    pub at: u64,
    /// Events frames: the head records, as they lie after the `heads` varint (empty: none).
    pub heads: Vec<u8>,
    /// How many head records `heads` holds.
    pub head_count: u64,
    /// Events frames: where its last `snapshot` record lies, counted from its first record.
    pub snapshot: Option<u64>,
}

/// A sidecar, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// The segment id it names.
    pub segment: u64,
    /// The segment length it records.
    pub segment_len: u64,
    /// The checksum of the segment's last bytes it records.
    pub tail_crc: u32,
    /// Its frames, in order.
    pub frames: Vec<SideFrame>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = *self.take(1)?.first()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The bytes before the first frame of a segment (its header).
const SEGMENT_HEADER_LEN: u64 = 32;

impl Sidecar {
    /// Decodes a sidecar's bytes (`None`: not one).
    pub fn decode(bytes: &[u8]) -> Option<Sidecar> {
        let body = bytes.get(..bytes.len().checked_sub(4)?)?;
        let mut c = Cursor { bytes: body, at: 0 };
        if c.take(4)? != b"SJIX" || c.u32()? != 2 {
            return None;
        }
        let (segment, segment_len, tail_crc) = (c.u64()?, c.u64()?, c.u32()?);
        let (sessions, count) = (c.u32()?, c.u64()?);
        let mut names = Vec::new();
        for _ in 0..sessions {
            let n = c.varint()? as usize;
            names.push(String::from_utf8(c.take(n)?.to_vec()).ok()?);
        }
        let mut end = SEGMENT_HEADER_LEN;
        let mut tails = vec![0u64; names.len()];
        let mut times = vec![0u64; names.len()];
        let mut frames = Vec::new();
        for _ in 0..count {
            let flags = *c.take(1)?.first()?;
            let k = c.varint()? as usize;
            let offset = end + c.varint()?;
            let len = c.varint()?;
            end = offset + len;
            let mut f = SideFrame {
                delete: flags & 1 != 0,
                session: names.get(k)?.clone(),
                offset,
                len,
                first: 0,
                count: 0,
                at: 0,
                heads: Vec::new(),
                head_count: 0,
                snapshot: None,
            };
            if !f.delete {
                f.first = if flags & 2 != 0 { c.varint()? } else { tails[k] };
                f.count = if flags & 4 != 0 { c.varint()? } else { 1 };
                tails[k] = f.first + f.count;
                let d = c.varint()?;
                let delta = (d >> 1) as i64 ^ -((d & 1) as i64);
                times[k] = times[k].checked_add_signed(delta)?;
                f.at = times[k];
                if flags & 8 != 0 {
                    f.head_count = c.varint()?;
                    let from = c.at;
                    for _ in 0..f.head_count {
                        if *c.take(1)?.first()? == 3 {
                            let n = c.varint()? as usize;
                            c.take(n)?;
                        }
                    }
                    f.heads = body.get(from..c.at)?.to_vec();
                }
                if flags & 16 != 0 {
                    f.snapshot = Some(c.varint()?);
                }
            }
            frames.push(f);
        }
        (c.at == body.len()).then_some(Sidecar { segment, segment_len, tail_crc, frames })
    }

    /// Encodes it as the writer would, with a checksum that holds.
    pub fn encode(&self) -> Vec<u8> {
        let mut names: Vec<String> = Vec::new();
        for f in &self.frames {
            if !names.contains(&f.session) {
                names.push(f.session.clone());
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(b"SJIX");
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&self.segment.to_le_bytes());
        out.extend_from_slice(&self.segment_len.to_le_bytes());
        out.extend_from_slice(&self.tail_crc.to_le_bytes());
        out.extend_from_slice(&(names.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.frames.len() as u64).to_le_bytes());
        for n in &names {
            put_varint(&mut out, n.len() as u64);
            out.extend_from_slice(n.as_bytes());
        }
        let mut end = SEGMENT_HEADER_LEN;
        let mut tails: Vec<Option<u64>> = vec![None; names.len()];
        let mut times = vec![0u64; names.len()];
        for f in &self.frames {
            let k = names.iter().position(|n| *n == f.session).unwrap_or_default();
            let flags = if f.delete {
                1
            } else {
                (if tails[k] == Some(f.first) { 0 } else { 2 })
                    | (if f.count == 1 { 0 } else { 4 })
                    | (if f.head_count == 0 { 0 } else { 8 })
                    | (if f.snapshot.is_none() { 0 } else { 16 })
            };
            out.push(flags);
            put_varint(&mut out, k as u64);
            put_varint(&mut out, f.offset.wrapping_sub(end));
            put_varint(&mut out, f.len);
            end = f.offset + f.len;
            if f.delete {
                continue;
            }
            if flags & 2 != 0 {
                put_varint(&mut out, f.first);
            }
            if flags & 4 != 0 {
                put_varint(&mut out, f.count);
            }
            tails[k] = Some(f.first + f.count);
            let delta = f.at.wrapping_sub(times[k]) as i64;
            put_varint(&mut out, ((delta << 1) ^ (delta >> 63)) as u64);
            times[k] = f.at;
            if flags & 8 != 0 {
                put_varint(&mut out, f.head_count);
                out.extend_from_slice(&f.heads);
            }
            if let Some(k) = f.snapshot {
                put_varint(&mut out, k);
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}
