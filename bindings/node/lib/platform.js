// Which prebuilt native module this machine loads: the napi-rs naming, one npm package per
// target (`stepjournal-<target>`, holding `stepjournal.<target>.node`). The package's loader and
// its build and pack scripts read the same table.

/** The targets a platform package is built for, by `${process.platform}-${process.arch}`. */
const TARGETS = {
  'linux-x64': { gnu: 'linux-x64-gnu' },
};

/** This machine's C library on Linux: 'gnu' (glibc) or 'musl'. */
function libc() {
  // Node's diagnostic report: its header names glibc's version when glibc runs this process.
  const report = /** @type {{ header?: { glibcVersionRuntime?: string } } | undefined} */ (process.report?.getReport?.());
  return report?.header?.glibcVersionRuntime ? 'gnu' : 'musl';
}

/**
 * This machine's target (`linux-x64-gnu`), or null when no platform package is built for it;
 * `host` is `${platform}-${arch}[-libc]`, for messages.
 */
export function currentTarget() {
  const key = `${process.platform}-${process.arch}`;
  const variants = TARGETS[key];
  const variant = process.platform === 'linux' ? libc() : 'default';
  const host = process.platform === 'linux' ? `${key}-${variant}` : key;
  return { target: variants?.[variant] ?? null, host };
}

/** Every target a platform package is built for. */
export function allTargets() {
  return Object.values(TARGETS).flatMap((v) => Object.values(v));
}

/** The platform package's name and its module's file name for `target`. */
export function platformPackage(target) {
  return { name: `stepjournal-${target}`, file: `stepjournal.${target}.node` };
}
