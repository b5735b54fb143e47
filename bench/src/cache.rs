//! Cold-cache runs: files synced and then dropped from this machine's page cache with
//! `dd iflag=nocache count=0` (GNU coreutils' `posix_fadvise(POSIX_FADV_DONTNEED)` on the whole
//! file), so that the next read comes from the disk without touching any other file's pages.

use std::path::PathBuf;
use std::process::Command;

/// Syncs `files` and evicts them from the page cache.
pub fn evict(files: &[PathBuf]) -> Result<(), String> {
    for f in files {
        let file =
            std::fs::File::open(f).map_err(|e| format!("cannot open {}: {e}", f.display()))?;
        // Dirty pages cannot be dropped: write them first.
        file.sync_all().map_err(|e| format!("cannot sync {}: {e}", f.display()))?;
        let out = Command::new("dd")
            .arg(format!("if={}", f.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .output()
            .map_err(|e| {
                format!("cannot run dd to evict {} from the page cache: {e}", f.display())
            })?;
        if !out.status.success() {
            return Err(format!(
                "dd could not evict {} from the page cache: {}",
                f.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Whether `dd` here can evict a file (GNU coreutils); checked once on a scratch file.
pub fn available(scratch: &std::path::Path) -> bool {
    let path = scratch.join("evict-probe");
    let ok =
        std::fs::write(&path, [0u8; 4096]).is_ok() && evict(std::slice::from_ref(&path)).is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

/// What a row's note says about the cache.
pub fn describe(cold: bool) -> &'static str {
    if cold {
        "cold: evicted from this machine's page cache first (the virtual disk's host may still cache)"
    } else {
        "warm: the files in the page cache"
    }
}
