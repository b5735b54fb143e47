//! Freeing space: removing segments that hold nothing needed, and compacting sealed segments
//! that are mostly dead (their live batches copied to the active segment, synced, then the
//! segment removed). Each removal is made durable before the index forgets the segment.

use std::io;

use stepjournal_codec::batch::Frame;

use super::index::{BatchLoc, Reclaim};
use super::layout::SegmentId;
use super::segment::IoFailure;
use super::state::{Core, lock};
use super::write::write_frames;

/// Frees space: removes every segment that holds nothing needed, and compacts sealed
/// segments that are mostly dead (their live batches copied to the active segment and synced,
/// then the segment removed). Each removal is made durable before the index forgets the
/// segment, so a deletion frame is never removed before the frames it hides. Called only by
/// the leader (or while opening).
pub(crate) fn reclaim(core: &Core) -> Result<(), IoFailure> {
    loop {
        let next = {
            let st = lock(&core.state);
            st.index.reclaim(st.active, core.options.segment_size)
        };
        match next {
            None => return Ok(()),
            Some(Reclaim::Remove(id)) => remove_segment(core, id)?,
            Some(Reclaim::Compact(id, live)) => compact(core, id, &live)?,
        }
    }
}

fn remove_segment(core: &Core, id: SegmentId) -> Result<(), IoFailure> {
    let path = core.segment_path(id);
    core.io
        .remove(&path)
        .map_err(|e| IoFailure::new(format!("removing segment {}", path.display()), e))?;
    core.io.sync_dir(&core.dir).map_err(|e| {
        IoFailure::new(format!("syncing directory {} after removing {id}", core.dir.display()), e)
    })?;
    lock(&core.state).index.forget(id);
    core.files.forget(id);
    Ok(())
}

/// Copies the live batches of segment `id` to the active segment, synced; afterwards the
/// segment holds nothing live and the next round removes it.
fn compact(core: &Core, id: SegmentId, live: &[(String, BatchLoc)]) -> Result<(), IoFailure> {
    let path = core.segment_path(id);
    if !lock(&core.state).index.segments.contains_key(&id) {
        return Ok(());
    }
    let file = core.files.get(id).map_err(|e| {
        IoFailure::new(format!("opening segment {} to compact it", path.display()), e)
    })?;
    let mut frames = Vec::with_capacity(live.len());
    for (session, run) in live {
        let at = format!("segment {} at byte {}", path.display(), run.offset);
        let mut frame = vec![0u8; run.len as usize];
        file.read_exact_at(&mut frame, run.offset)
            .map_err(|e| IoFailure::new(format!("reading {at} to compact it"), e))?;
        match Frame::parse(&frame, &core.options.limits) {
            Ok((f, len)) if f.count == run.count && len == frame.len() => {}
            other => {
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok(_) => format!("not the batch of {session} the index expects"),
                };
                let e = io::Error::new(io::ErrorKind::InvalidData, why);
                return Err(IoFailure::new(format!("compacting {at}: corrupt data"), e));
            }
        }
        frames.push(frame);
    }
    // Groups of at most `max_group_bytes`, the last one synced.
    let mut chunks: Vec<&[Vec<u8>]> = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, f) in frames.iter().enumerate() {
        if i > start && bytes + f.len() as u64 > core.options.max_group_bytes {
            chunks.push(frames.get(start..i).unwrap_or_default());
            start = i;
            bytes = 0;
        }
        bytes += f.len() as u64;
    }
    chunks.push(frames.get(start..).unwrap_or_default());
    let mut placed = Vec::with_capacity(frames.len());
    let mut new_segments = Vec::new();
    let last = chunks.len().saturating_sub(1);
    for (k, chunk) in chunks.iter().enumerate() {
        if chunk.is_empty() {
            continue;
        }
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        let w = write_frames(core, &refs, k == last)?;
        placed.extend(w.offsets(refs.iter().map(|f| f.len())).map(|o| (w.seg, o)));
        if let Some(f) = w.new_segment {
            new_segments.push((w.seg, f));
        }
    }
    let mut st = lock(&core.state);
    for (seg, file) in new_segments {
        st.index.add_segment(seg);
        core.files.put(seg, file, true);
        st.active = Some(seg);
    }
    for ((session, run), (seg, offset)) in live.iter().zip(placed) {
        st.index.moved(session, run.first, seg, offset);
    }
    debug_assert!(
        st.index.segments.get(&id).is_none_or(|s| s.live == 0),
        "a compacted segment holds nothing live"
    );
    Ok(())
}
