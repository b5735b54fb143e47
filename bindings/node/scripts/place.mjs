// Puts a built native module where it is loaded from without ever writing into that file: the
// bytes go to a new file beside it, synced, then renamed over it. A process that has the old
// module mapped keeps its inode, intact (copying over it in place truncated the mapped pages and
// killed such a process with SIGBUS).
import { closeSync, copyFileSync, fsyncSync, openSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Copies `source` to `dest` by writing `dest.<pid>.tmp` and renaming it over `dest`; `prepare`,
 * if given, is called with the new file's path before the rename (the pack strips it there).
 */
export function place(source, dest, prepare) {
  const temporary = `${dest}.${process.pid}.tmp`;
  try {
    copyFileSync(source, temporary);
    prepare?.(temporary);
    syncPath(temporary);
    renameSync(temporary, dest);
  } catch (e) {
    rmSync(temporary, { force: true });
    throw e;
  }
  syncPath(dirname(dest));
}

function syncPath(path) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
