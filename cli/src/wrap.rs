//! Wrapping long lines to the terminal's width: a line longer than the width is continued on
//! the next lines, each indented under the text it continues. ANSI colour codes take no width.

/// Splits `line` into lines of at most `width` visible characters (colour codes are kept and
/// count for nothing); every line after the first starts with `indent` spaces. A break falls
/// at the last space that fits, or inside a word longer than the room left. A width too small
/// to hold the indent and some text wraps nothing.
pub fn wrap(line: &str, width: usize, indent: usize) -> Vec<String> {
    if width < indent + 20 || visible(line) <= width {
        return vec![line.to_owned()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    // The byte offset in `current` just after the last space, and the columns up to it.
    let mut space: Option<(usize, usize)> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            current.push(c);
            for d in chars.by_ref() {
                current.push(d);
                if d == 'm' {
                    break;
                }
            }
            continue;
        }
        if used == width {
            let cut = match space {
                Some((at, w)) if w > indent => at,
                _ => current.len(),
            };
            let rest = current.split_off(cut);
            out.push(current.trim_end().to_owned());
            current = " ".repeat(indent);
            current.push_str(rest.trim_start_matches(' '));
            used = indent + visible(rest.trim_start_matches(' '));
            space = None;
        }
        current.push(c);
        used += 1;
        if c == ' ' && used > indent {
            space = Some((current.len(), used));
        }
    }
    out.push(current);
    out
}

/// How many characters of `text` take a column (colour codes take none).
fn visible(text: &str) -> usize {
    let mut n = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_continued_under_its_text_and_nothing_is_lost() {
        let line = format!("{:<10}{}", "12", "word ".repeat(30).trim_end());
        let parts = wrap(&line, 40, 10);
        assert!(parts.len() > 1, "{parts:?}");
        for p in &parts {
            assert!(visible(p) <= 40, "{p:?}");
        }
        for p in &parts[1..] {
            assert!(p.starts_with(&" ".repeat(10)) && !p[10..].starts_with(' '), "{p:?}");
        }
        let joined: Vec<&str> = parts.iter().flat_map(|p| p.split_whitespace()).collect();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(joined, words);
    }

    #[test]
    fn colour_codes_take_no_width_and_a_short_line_is_kept() {
        let painted = format!("\x1b[36m{}\x1b[0m", "x".repeat(30));
        assert_eq!(wrap(&painted, 30, 5), vec![painted.clone()]);
        let long = "y".repeat(100);
        let parts = wrap(&long, 40, 5);
        assert_eq!(parts.iter().map(|p| p.trim().len()).sum::<usize>(), 100);
        assert_eq!(wrap("short", 10, 0), vec!["short".to_owned()]);
    }
}
