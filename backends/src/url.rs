//! Store URLs: `file:PATH`, `sqlite:PATH`, `postgres://...` / `postgresql://...`.

use std::path::PathBuf;

use crate::OpenError;

/// A parsed store URL. Its `Display` and `Debug` hide a PostgreSQL URL's password.
#[derive(Clone, PartialEq, Eq)]
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
        let bad = |reason: &str| OpenError::Url {
            url: crate::redact::redact(url),
            reason: reason.to_owned(),
        };
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

    /// `url` as every message names it: with any password hidden (`postgres://user:***@host`, a
    /// `password` query parameter or `key=value` pair); `file:` and `sqlite:` URLs unchanged.
    pub fn redacted(url: &str) -> String {
        crate::redact::redact(url)
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::File(p) => f.debug_tuple("File").field(p).finish(),
            StoreUrl::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreUrl::Postgres(u) => {
                f.debug_tuple("Postgres").field(&crate::redact::redact(u)).finish()
            }
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::File(p) => write!(f, "file:{}", p.display()),
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            StoreUrl::Postgres(u) => f.write_str(&crate::redact::redact(u)),
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
    fn a_missing_store_is_not_created_unless_asked() {
        let dir = std::env::temp_dir().join(format!("sj-url-{}", std::process::id()));
        let url = format!("file:{}", dir.display());
        let err = open_url(&url, OpenOptions::read_only()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("no journal directory"), "{err}");
        let store = open_url(&url, OpenOptions::create()).unwrap();
        assert_eq!(store.sessions().unwrap(), Vec::new());
        drop(store);
        let reader = open_url(&url, OpenOptions::read_only()).unwrap();
        assert!(reader.sessions().unwrap().is_empty());
        drop(reader);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_backend_left_out_of_the_build_names_its_feature() {
        let err = open_url("postgres://x@127.0.0.1/db", OpenOptions::read_only())
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("`postgres` feature"), "{err}");
    }

    #[test]
    fn a_urls_password_is_in_no_message_display_or_debug() {
        // Defect: `StoreUrl`'s `Display` and `Debug` and the URL errors printed a password
        // given in the URL.
        let url = "postgres://u:s3cretpw@h/db?password=s3cretpw";
        let parsed = StoreUrl::parse(url).unwrap();
        assert_eq!(parsed.to_string(), "postgres://u:***@h/db?password=***");
        assert!(!format!("{parsed:?}").contains("s3cretpw"), "{parsed:?}");
        for bad in ["mysql://u:s3cretpw@h/db", "host=h password=s3cretpw", "u:s3cretpw@h"] {
            let err = StoreUrl::parse(bad).unwrap_err();
            assert!(!err.to_string().contains("s3cretpw"), "{err}");
            assert!(!format!("{err:?}").contains("s3cretpw"), "{err:?}");
        }
    }

    #[test]
    fn a_directory_of_other_files_is_refused_and_left_unchanged() {
        // Defect: opening `file:DIR` for writing wrote a journal into a directory full of
        // unrelated files.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
        std::fs::create_dir(dir.path().join("photos")).unwrap();
        let url = format!("file:{}", dir.path().display());
        for options in [OpenOptions::create(), OpenOptions { read_only: false, create: false }] {
            let err = open_url(&url, options).map(|_| ()).unwrap_err().to_string();
            assert!(err.contains("is not a stepjournal store"), "{err}");
            assert!(err.contains("`notes.txt`, `photos`"), "{err}");
        }
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["notes.txt", "photos"], "nothing was written");
        // A path that is a file is refused too.
        let file = dir.path().join("notes.txt");
        let err = open_url(&format!("file:{}", file.display()), OpenOptions::create())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains("a file, not a directory"), "{err}");
    }

    #[test]
    fn a_journals_own_directory_is_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file:{}", dir.path().join("j").display());
        drop(open_url(&url, OpenOptions::create()).unwrap());
        drop(open_url(&url, OpenOptions::create()).unwrap());
    }

    #[test]
    fn anything_else_is_a_clear_error() {
        for url in ["", "mysql://x", "file:", "/tmp/j", "sqlite://"] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(&format!("`{url}`")), "{err}");
        }
    }
}

/// Refuses to write into an existing directory that holds anything but a file journal's files
/// ([`is_journal_entry`](crate::file::is_journal_entry)), or into a path that is not a directory. A missing or
/// empty directory passes. Nothing is changed.
fn refuse_foreign_dir(dir: &std::path::Path) -> Result<(), OpenError> {
    let location = dir.display().to_string();
    let io = |source| {
        OpenError::Store(crate::StoreError::Io {
            context: format!("listing the journal directory {location}"),
            source,
        })
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(OpenError::NotAJournal {
                location,
                found: "a file, not a directory".to_owned(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    let mut foreign = Vec::new();
    for entry in entries {
        let name = entry.map_err(io)?.file_name();
        let ours = name.to_str().is_some_and(crate::file::is_journal_entry);
        if !ours {
            foreign.push(name.to_string_lossy().into_owned());
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let n = foreign.len();
    let mut named: Vec<String> = foreign.into_iter().take(10).map(|f| format!("`{f}`")).collect();
    if n > named.len() {
        named.push(format!("{} more", n - named.len()));
    }
    let what = if n == 1 { "an entry" } else { "entries" };
    Err(OpenError::NotAJournal {
        location,
        found: format!("{what} that a file journal does not write ({})", named.join(", ")),
    })
}

/// How [`open_url`] opens a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Open for reading only (default `false`). A file journal is then opened without the
    /// writer's lock, so it can be inspected while a runtime writes it.
    pub read_only: bool,
    /// Create the store when it does not exist (default `false`: a missing store is an error).
    pub create: bool,
}

impl OpenOptions {
    /// Open an existing store for reading only.
    pub fn read_only() -> Self {
        OpenOptions { read_only: true, create: false }
    }

    /// Open for writing, creating the store when absent.
    pub fn create() -> Self {
        OpenOptions { read_only: false, create: true }
    }
}

/// Opens the store a URL names: `file:PATH`, `sqlite:PATH`, `postgres://...` or
/// `postgresql://...`, each backend with its default options. A backend left out of this build
/// is a clear error naming the feature that adds it.
///
/// Opened for writing, a store that exists must be a journal store: a directory holding files
/// a file journal does not write, an SQLite database or a PostgreSQL schema holding other
/// tables, is refused with [`OpenError::NotAJournal`], unchanged.
pub fn open_url(
    url: &str,
    options: OpenOptions,
) -> Result<std::sync::Arc<dyn crate::JournalStore>, OpenError> {
    let parsed = StoreUrl::parse(url)?;
    let missing = |what: &str, path: &std::path::Path| OpenError::Url {
        url: crate::redact::redact(url),
        reason: format!("no {what} at {}", path.display()),
    };
    match parsed {
        StoreUrl::File(dir) => {
            if !options.create && !dir.is_dir() {
                return Err(missing("journal directory", &dir));
            }
            if !options.read_only {
                refuse_foreign_dir(&dir)?;
            }
            let file_options = crate::file::FileOptions::new().read_only(options.read_only);
            Ok(std::sync::Arc::new(crate::file::FileStore::open(&dir, file_options)?))
        }
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(path) => {
            if !options.create && !path.is_file() {
                return Err(missing("SQLite database", &path));
            }
            let sqlite_options =
                crate::sqlite::SqliteOptions::default().read_only(options.read_only);
            Ok(std::sync::Arc::new(crate::sqlite::SqliteStore::open(&path, sqlite_options)?))
        }
        #[cfg(not(feature = "sqlite"))]
        StoreUrl::Sqlite(_) => Err(OpenError::FeatureDisabled {
            url: crate::redact::redact(url),
            backend: "sqlite",
            feature: "sqlite",
        }),
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(pg) => {
            let pg_options = crate::postgres::PostgresOptions {
                read_only: options.read_only,
                create: options.create,
                ..Default::default()
            };
            Ok(std::sync::Arc::new(crate::postgres::PostgresStore::connect(&pg, pg_options)?))
        }
        #[cfg(not(feature = "postgres"))]
        StoreUrl::Postgres(_) => Err(OpenError::FeatureDisabled {
            url: crate::redact::redact(url),
            backend: "postgres",
            feature: "postgres",
        }),
    }
}
