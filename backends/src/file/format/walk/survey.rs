//! What the bytes after a segment's first damage hold.

use std::io;

use super::window::{CHUNK, Window};
use crate::file::format::layout::{GROUP_HEADER_LEN, GroupHeader};

/// What the bytes after a segment's first damage hold, found by one pass over them: every intact
/// group header (at any byte, inside damaged groups too) and where the last non-zero byte is.
#[derive(Debug, Default)]
pub(super) struct Survey {
    /// Each intact group header's offset and the durable point it claims, in order.
    headers: Vec<(u64, u64)>,
    /// `claims[i]`: the largest durable point claimed by `headers[i..]`.
    claims: Vec<u64>,
    pub(super) last_nonzero: Option<u64>,
}

impl Survey {
    pub(super) fn of(w: &mut Window<'_>, from: u64) -> io::Result<Survey> {
        let mut s = Survey::default();
        let mut pos = from;
        loop {
            let rest = w.len.saturating_sub(pos);
            if rest == 0 {
                break;
            }
            let n = usize::try_from(rest).map_or(CHUNK, |r| r.min(CHUNK));
            let bytes = w.bytes(pos, n)?;
            if bytes.is_empty() {
                break;
            }
            if let Some(i) = bytes.iter().rposition(|b| *b != 0) {
                let at = pos + i as u64;
                s.last_nonzero = Some(s.last_nonzero.map_or(at, |z| z.max(at)));
            }
            // The positions with a whole header's bytes in this window; the last
            // GROUP_HEADER_LEN - 1 are looked at again in the next.
            let whole = bytes.len().saturating_sub(GROUP_HEADER_LEN - 1);
            for i in 0..whole {
                let here = bytes.get(i..).unwrap_or_default();
                if GroupHeader::magic_at(here)
                    && let Ok(g) = GroupHeader::parse(here)
                {
                    s.headers.push((pos + i as u64, g.synced));
                }
            }
            if pos.saturating_add(bytes.len() as u64) >= w.len {
                break;
            }
            pos += whole.max(1) as u64;
        }
        let mut max = 0;
        s.claims = s
            .headers
            .iter()
            .rev()
            .map(|(_, synced)| {
                max = max.max(*synced);
                max
            })
            .collect();
        s.claims.reverse();
        Ok(s)
    }

    /// The first intact group header after `cut`, and the largest durable point claimed after it.
    pub(super) fn after(&self, cut: u64) -> (Option<u64>, u64) {
        let i = self.headers.partition_point(|(at, _)| *at <= cut);
        (self.headers.get(i).map(|(at, _)| *at), self.claims.get(i).copied().unwrap_or(0))
    }

    /// Whether every byte from `at` to the end of the file is zero.
    pub(super) fn zeros_from(&self, at: u64) -> bool {
        self.last_nonzero.is_none_or(|z| z < at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::io::Io;
    use crate::file::io::sim::SimDisk;

    #[test]
    fn the_survey_finds_headers_across_window_edges_and_the_last_data_byte() {
        let disk = SimDisk::new();
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let f = disk.create_new(std::path::Path::new("/d/s")).unwrap();
        let mut header = [0u8; GROUP_HEADER_LEN];
        GroupHeader { len: 1, frames: 1, synced: 77 }.encode_into(&mut header);
        // One header straddling the first window's end, one near the file's end, then zeros.
        let first = CHUNK as u64 - 10;
        f.write_all_at(&header, first).unwrap();
        let second = CHUNK as u64 + 1000;
        f.write_all_at(&header, second).unwrap();
        f.set_len(second + 5000).unwrap();
        let mut buf = Vec::new();
        let len = f.len().unwrap();
        let mut w = Window::new(&*f, len, &mut buf);
        let s = Survey::of(&mut w, 0).unwrap();
        assert_eq!(s.headers, vec![(first, 77), (second, 77)]);
        assert_eq!(s.after(0), (Some(first), 77));
        assert_eq!(s.after(first), (Some(second), 77));
        assert_eq!(s.after(second), (None, 0));
        let last_byte = header.iter().rposition(|b| *b != 0).unwrap() as u64;
        assert_eq!(s.last_nonzero, Some(second + last_byte));
        assert!(s.zeros_from(second + GROUP_HEADER_LEN as u64));
        assert!(!s.zeros_from(second));
    }
}
