//! The file backend: the conformance suite on real files and on the simulated disk, and its own
//! behaviour (rotation, reopening, deletion and space, locking, read-only opening).

use stepjournal_backends::file::FileOptions;
use stepjournal_tests::file_fixture::{RealFixture, SimFixture};

mod real_files {
    use super::*;
    stepjournal_tests::backend_conformance!(|| RealFixture::new(FileOptions::new()));
}

mod small_segments {
    use super::*;
    stepjournal_tests::backend_conformance!(|| RealFixture::new(
        FileOptions::new().segment_size(4096)
    ));
}

mod simulated_disk {
    use super::*;
    stepjournal_tests::backend_conformance!(|| SimFixture::new(
        FileOptions::new().segment_size(8192)
    ));
}
