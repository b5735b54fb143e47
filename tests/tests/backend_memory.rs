//! The backend conformance suite on the in-memory backend.

use stepjournal_backends::memory::MemoryStore;

stepjournal_tests::backend_conformance!(|| Box::new(MemoryStore::new()));
