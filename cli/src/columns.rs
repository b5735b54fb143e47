//! Column widths of the command's tables, computed from stored data and bounded: a column is
//! padded to its widest cell up to [`MAX_COLUMN`] characters, and a wider cell is printed whole
//! past it (the formatter's widths are bounded too: a width from a 65,536-character tool name
//! made it panic).

/// The widest a column is padded to, in characters.
pub(crate) const MAX_COLUMN: usize = 64;

/// `width` bounded by [`MAX_COLUMN`].
pub(crate) fn bounded(width: usize) -> usize {
    width.min(MAX_COLUMN)
}

/// The widths of a table's columns: each its header's or its widest cell's, in characters,
/// bounded by [`MAX_COLUMN`].
pub(crate) fn widths<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> [usize; N] {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths.map(bounded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_widest_cell_up_to_the_bound() {
        let rows = [["abc".to_owned(), "x".repeat(70_000)], ["a".to_owned(), "yy".to_owned()]];
        assert_eq!(widths(["H", "TOOL"], &rows), [3, MAX_COLUMN]);
        assert_eq!(bounded(65_536), MAX_COLUMN);
        assert_eq!(format!("{:<w$}|", "x".repeat(70_000), w = bounded(70_000)).len(), 70_001);
    }
}
