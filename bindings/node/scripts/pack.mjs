// `npm run pack`: the tarballs users install, written into bindings/node/:
//
//   stepjournal-<version>.tgz                the JavaScript, the types, the examples; the
//                                            platform package as an optional dependency
//   stepjournal-<target>-<version>.tgz       this machine's platform package: the release module
//
// as napi-rs packages ship: `npm install ./stepjournal-*.tgz` installs both, and npm installs a
// platform package only on the platform it names (its `os`, `cpu`, `libc`). The release module is
// built with cargo, stripped of its debug sections and placed in npm/<target>/ (written beside and
// renamed); `--debug` packs the debug build instead (CI's quick check of the layout). The main package is
// packed from a staged copy whose package.json names the platform packages, so a checkout's
// `npm ci` never looks for them on the registry. Nothing in either tarball runs at install.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { allTargets, currentTarget, platformPackage } from '../lib/platform.js';
import { build, packageDir } from './build.mjs';

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));

/** Runs `npm pack` in `dir`, writing the tarball into bindings/node/; its path. */
function npmPack(dir) {
  const r = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', packageDir], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed with status ${r.status}:\n${r.stderr}`);
  const [{ filename }] = JSON.parse(r.stdout);
  return join(packageDir, filename);
}

/** The platform package of this machine's target, its module built in `profile`. */
function packPlatform(version, profile) {
  const { target, host } = currentTarget();
  if (target === null) throw new Error(`stepjournal: no platform package is defined for ${host}`);
  const dir = join(packageDir, 'npm', target);
  const manifest = readJson(join(dir, 'package.json'));
  const { name, file } = platformPackage(target);
  if (manifest.name !== name || manifest.version !== version || manifest.main !== file) {
    throw new Error(`stepjournal: npm/${target}/package.json must be ${name}@${version} with main ${file} (it is ${manifest.name}@${manifest.version}, main ${manifest.main})`);
  }
  build({ profile, out: join(dir, file), strip: true });
  return npmPack(dir);
}

/** The main package, staged with the platform packages as optional dependencies. */
function packMain(manifest) {
  const stage = mkdtempSync(join(tmpdir(), 'stepjournal-pack-'));
  try {
    for (const entry of manifest.files) cpSync(join(packageDir, entry), join(stage, entry), { recursive: true });
    const staged = { ...manifest };
    delete staged.scripts;
    delete staged.devDependencies;
    staged.optionalDependencies = Object.fromEntries(allTargets().map((t) => [platformPackage(t).name, manifest.version]));
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(staged, null, 2)}\n`);
    return npmPack(stage);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

const { values } = parseArgs({ options: { debug: { type: 'boolean' } } });
try {
  const manifest = readJson(join(packageDir, 'package.json'));
  const platform = packPlatform(manifest.version, values.debug ? 'debug' : 'release');
  const main = packMain(manifest);
  console.log(main);
  console.log(platform);
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
