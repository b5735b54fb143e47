//! Store URLs: `file:PATH`, `sqlite:PATH`, `postgres://...` / `postgresql://...`.

use std::path::PathBuf;

use crate::OpenError;

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `file:PATH` (or `file://PATH`): the file backend's directory.
    File(PathBuf),
    /// `sqlite:PATH` (or `sqlite://PATH`): an SQLite database file.
    Sqlite(PathBuf),
    /// `postgres://...` or `postgresql://...`: a libpq-style connection URL, kept whole.
    Postgres(String),
}

impl StoreUrl {
    /// Parses a store URL. Paths may be relative or absolute; anything else is a clear error.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        let bad = |reason: &str| OpenError::Url { url: url.to_owned(), reason: reason.to_owned() };
        let path = |rest: &str| -> Result<PathBuf, OpenError> {
            // `file:///abs` and `file://rel` both name a path after the `//`.
            let rest = rest.strip_prefix("//").unwrap_or(rest);
            if rest.is_empty() {
                return Err(bad("the URL names no path"));
            }
            Ok(PathBuf::from(rest))
        };
        if let Some(rest) = url.strip_prefix("file:") {
            Ok(StoreUrl::File(path(rest)?))
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            Ok(StoreUrl::Sqlite(path(rest)?))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreUrl::Postgres(url.to_owned()))
        } else {
            Err(bad("expected file:PATH, sqlite:PATH, postgres://... or postgresql://..."))
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::File(p) => write!(f, "file:{}", p.display()),
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            StoreUrl::Postgres(u) => f.write_str(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_parses_to_its_backend() {
        assert_eq!(StoreUrl::parse("file:./j").unwrap(), StoreUrl::File("./j".into()));
        assert_eq!(StoreUrl::parse("file:///tmp/j").unwrap(), StoreUrl::File("/tmp/j".into()));
        assert_eq!(
            StoreUrl::parse("sqlite:db.sqlite").unwrap(),
            StoreUrl::Sqlite("db.sqlite".into())
        );
        let pg = "postgresql://postgres@127.0.0.1:5432/test";
        assert_eq!(StoreUrl::parse(pg).unwrap(), StoreUrl::Postgres(pg.into()));
    }

    #[test]
    fn anything_else_is_a_clear_error() {
        for url in ["", "mysql://x", "file:", "/tmp/j", "sqlite://"] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(&format!("`{url}`")), "{err}");
        }
    }
}
