//! A window over a file, refilled with large sequential reads.

use std::io;

use crate::file::io::IoFile;

/// How much a walk reads at a time.
pub(super) const CHUNK: usize = 4 << 20;

/// A window over a file, refilled with large sequential reads.
#[derive(Debug)]
pub(crate) struct Window<'f> {
    file: &'f dyn IoFile,
    /// The file's length when the walk began; nothing past it is read.
    pub(super) len: u64,
    buf: &'f mut Vec<u8>,
    /// The file offset of `buf[0]`.
    start: u64,
}

impl<'f> Window<'f> {
    pub(crate) fn new(file: &'f dyn IoFile, len: u64, buf: &'f mut Vec<u8>) -> Self {
        buf.clear();
        Window { file, len, buf, start: 0 }
    }

    /// The bytes `[offset, offset + n)`, clipped to the file's length.
    pub(crate) fn bytes(&mut self, offset: u64, n: usize) -> io::Result<&[u8]> {
        let end = offset.saturating_add(n as u64).min(self.len);
        let n = end.saturating_sub(offset) as usize;
        let have_end = self.start + self.buf.len() as u64;
        if offset < self.start || end > have_end {
            let want = (n.max(CHUNK) as u64).min(self.len.saturating_sub(offset)) as usize;
            self.buf.resize(want, 0);
            let mut got = 0;
            while got < want {
                let Some(rest) = self.buf.get_mut(got..) else { break };
                match self.file.read_at(rest, offset + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.buf.truncate(got);
            self.start = offset;
            if got < want {
                // The file is shorter than when the walk began: a writer sealed it, cutting off
                // the zeros ahead of its data. It ends here.
                self.len = offset + got as u64;
            }
        }
        let from = offset.saturating_sub(self.start) as usize;
        let n = n.min(self.buf.len().saturating_sub(from));
        Ok(self.buf.get(from..from + n).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::io::Io;
    use crate::file::io::sim::SimDisk;

    #[test]
    fn a_file_that_shrinks_under_a_walk_ends_where_it_now_ends() {
        // A read-only walk takes the newest segment's length; its writer may seal it meanwhile,
        // cutting the zeros ahead of its data.
        let disk = SimDisk::new();
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let f = disk.create_new(std::path::Path::new("/d/s")).unwrap();
        f.write_all_at(&[7u8; 100], 0).unwrap();
        let mut buf = Vec::new();
        let mut w = Window::new(&*f, 100, &mut buf);
        f.set_len(60).unwrap();
        assert_eq!(w.bytes(10, 80).unwrap(), &[7u8; 50][..]);
        assert_eq!(w.len, 60);
        assert!(w.bytes(70, 10).unwrap().is_empty());
    }
}
