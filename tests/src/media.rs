//! Media the crash simulator runs on beyond the ones `stepjournal-sim` ships.

/// SQLite on a temporary file (feature `sqlite`): a crash drops the handle; committed
/// transactions survive it.
#[cfg(feature = "sqlite")]
pub mod sqlite {
    use std::path::PathBuf;
    use std::sync::Arc;

    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
    use stepjournal_backends::{JournalStore, OpenError};
    use stepjournal_sim::Medium;

    /// SQLite on a temporary file.
    #[derive(Debug)]
    pub struct SqliteMedium {
        _dir: tempfile::TempDir,
        path: PathBuf,
    }

    impl SqliteMedium {
        /// A medium on a fresh temporary directory.
        pub fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("journal.sqlite");
            SqliteMedium { _dir: dir, path }
        }
    }

    impl Default for SqliteMedium {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Medium for SqliteMedium {
        fn name(&self) -> String {
            "sqlite".to_owned()
        }

        fn open(&mut self) -> Result<Arc<dyn JournalStore>, OpenError> {
            Ok(Arc::new(SqliteStore::open(&self.path, SqliteOptions::default())?))
        }

        fn crash(&mut self, _seed: u64) {}
    }
}
