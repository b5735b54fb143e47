//! The on-disk format, and what its bytes mean: how segments and group headers are laid out
//! (`layout`), what the journal's directory entries are named (`names`), the one walk over a
//! segment's groups and frames that judges damage (`walk`), what a batch's records tell of its
//! session's head (`heads`), and what a torn tail held (`torn`).
//!
//! Nothing here writes: the walk reads through the I/O seam (`io`), and everything else is
//! bytes in, meaning out. Each module uses only those listed before it: `layout`, `names`,
//! `heads`, `walk`, `torn`.

pub(crate) mod heads;
pub mod layout;
pub(crate) mod names;
pub(crate) mod torn;
pub(crate) mod walk;
